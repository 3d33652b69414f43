// kiln._C._codegen.emit_cpp (see CppCodegenBinding.h): parses and verifies a loop program given
// as text and returns the C++ source the code generator makes of it.
#include "frontend/binding/CppCodegenBinding.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include "codegen/CppCodegen.h"
#include "ir/loop/Parser.h"
#include "ir/loop/Verifier.h"
#include "runtime/Error.h"

namespace nb = nanobind;

namespace kiln::python {

void registerCppCodegen(nb::module_& m) {
  // def_submodule returns the existing kiln._C._codegen when another part defined it first.
  nb::module_ c = m.def_submodule("_codegen", "generated C++: code generation and compilation");
  c.def(
      "emit_cpp",
      [](std::string_view text, int64_t parallelThreshold, std::string entryName, bool prelude) {
        LoopParseResult r = parseLoopPrograms(text);
        if (r.error) throw ValueError(formatDiagnostic(*r.error, "<program>", text));
        KILN_CHECK_VALUE(r.programs.size() == 1, "emit_cpp: expected one loop program, got ",
                         r.programs.size());
        std::vector<Diagnostic> problems = verifyLoopProgram(r.programs[0]);
        if (!problems.empty()) throw ValueError(formatDiagnostic(problems[0], "<program>", text));
        codegen::CppOptions options;
        options.parallelThreshold = parallelThreshold;
        options.entryName = std::move(entryName);
        options.prelude = prelude;
        return codegen::emitCpp(r.programs[0], options);
      },
      nb::arg("program_text"), nb::arg("parallel_threshold") = 32768,
      nb::arg("entry_name") = "kiln_entry", nb::arg("prelude") = true,
      "the C++ source of a loop program given in its text form (docs/loop-ir.md)");
}

} // namespace kiln::python
