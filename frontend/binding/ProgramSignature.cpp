// A compiled loop program's calling convention (see ProgramSignature.h).
#include "frontend/binding/ProgramSignature.h"

#include <optional>

#include "ir/Diagnostic.h"
#include "ir/loop/Parser.h"
#include "ir/loop/Verifier.h"

namespace kiln::python {

ProgramSignature readProgramSignature(std::string_view text, const char* who) {
  LoopParseResult r = parseLoopPrograms(text);
  if (r.error) throw ValueError(formatDiagnostic(*r.error, "<program>", text));
  KILN_CHECK_VALUE(r.programs.size() == 1, who, ": expected one loop program, got ", r.programs.size());
  std::vector<Diagnostic> problems = verifyLoopProgram(r.programs[0]);
  if (!problems.empty()) throw ValueError(formatDiagnostic(problems[0], "<program>", text));
  ProgramSignature s{std::move(r.programs[0]), {}, {}, {}};
  const LoopProgram& p = s.program;
  for (const LoopInput& in : p.inputs) s.inputs.push_back({in.name, in.dtype, in.sizes, in.strides});
  for (const std::string& version : p.outputs) {
    // A version written in place stands for its whole storage.
    std::string out = p.storageRoot(version);
    if (const Buffer* b = p.findBuffer(out)) {
      s.outputs.push_back({out, b->dtype, b->sizes, {}});
    } else {
      const LoopInput* in = p.findInput(out);
      KILN_CHECK_VALUE(in != nullptr, who, ": unknown output %", out);
      s.outputs.push_back({out, in->dtype, in->sizes, {}});
    }
  }
  for (const std::string& sym : p.sizeSymbols()) {
    std::optional<SymbolSource> source;
    for (size_t i = 0; i < s.inputs.size() && !source; ++i)
      for (size_t d = 0; d < s.inputs[i].sizes.size() && !source; ++d)
        if (s.inputs[i].sizes[d] == IndexExpr::var(sym)) source = SymbolSource{sym, i, d};
    KILN_CHECK_VALUE(source.has_value(), who, ": program @", p.name, ": size symbol ", sym,
                     " is not the size of an input dim, so a call cannot bind it");
    s.symbols.push_back(*source);
  }
  return s;
}

} // namespace kiln::python
