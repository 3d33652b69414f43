// kiln._C._codegen.emit_cpp (see CppCodegenBinding.h): parses and verifies a loop program given
// as text and returns the C++ source the code generator makes of it; kiln._C._codegen.lower:
// a prims graph (a kiln.fx.Graph or its text) -> the text of its loop program;
// kiln._C._codegen.schedule: a loop program's text -> (scheduled text, decision log).
#include "frontend/binding/CppCodegenBinding.h"
#include "frontend/binding/CudaCodegenBinding.h"

#include <cstdint>
#include <nanobind/stl/string.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string_view.h>

#include "codegen/CppCodegen.h"
#include "codegen/CppPrelude.h"
#include "compiler/Lowering.h"
#include "frontend/binding/FxBinding.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "ir/loop/Parser.h"
#include "ir/loop/Printer.h"
#include "ir/loop/Verifier.h"
#include "passes/loop/Schedule.h"
#include "runtime/Error.h"

namespace nb = nanobind;

namespace kiln::python {

void registerCppCodegen(nb::module_& m) {
  // def_submodule returns the existing kiln._C._codegen when another part defined it first.
  nb::module_ c = m.def_submodule("_codegen", "generated C++: code generation and compilation");
  c.def(
      "emit_cpp",
      [](std::string_view text, int64_t parallelThreshold, std::string entryName, bool prelude,
         int translationUnits, std::map<std::string, int64_t> sizeHints) {
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
        options.translationUnits = translationUnits;
        options.sizeHints = std::move(sizeHints);
        return codegen::emitCpp(r.programs[0], options);
      },
      nb::arg("program_text"), nb::arg("parallel_threshold") = 32768,
      nb::arg("entry_name") = "kiln_entry", nb::arg("prelude") = true,
      nb::arg("translation_units") = 0, nb::arg("size_hints") = std::map<std::string, int64_t>(),
      "the C++ source of a loop program given in its text form (docs/loop-ir.md)");
  c.def("cpp_prelude", [] { return codegen::cppPrelude(); },
        "the text every generated C++ source begins with (headers, KilnContext, helpers); a source "
        "holding several programs has it once, then each program's emit_cpp(prelude=False) in its "
        "own namespace");
  c.attr("END_OF_PRELUDE_MARKER") = codegen::kEndOfPreludeMarker;
  c.attr("TRANSLATION_UNIT_MARKER") = codegen::kTranslationUnitMarker;
  c.def(
      "lower",
      [](nb::handle graph) {
        // A kiln.fx.Graph is lowered as it is (its nodes carry their types); anything else
        // through its text form.
        // (A graph failing verification goes the text way too: its diagnostic then points
        // into the text.)
        if (const Graph* g = cppGraphOf(graph); g && verify(*g).empty())
          return printLoopProgram(compiler::lowerToLoops(*g));
        std::string text = nb::cast<std::string>(nb::str(graph));
        ParseResult r = parseGraphs(text);
        if (r.error) throw ValueError(formatDiagnostic(*r.error, "<graph>", text));
        KILN_CHECK_VALUE(r.graphs.size() == 1, "lower: expected one graph, got ", r.graphs.size());
        std::vector<Diagnostic> problems = verify(r.graphs[0]);
        if (!problems.empty()) throw ValueError(formatDiagnostic(problems[0], "<graph>", text));
        return printLoopProgram(compiler::lowerToLoops(r.graphs[0]));
      },
      nb::arg("graph"),
      "the loop program (text form) of a prims graph with static shapes (kiln.fx.retrace(g, "
      "\"prims\") first)");
  c.def(
      "schedule",
      [](std::string_view text) {
        LoopParseResult r = parseLoopPrograms(text);
        if (r.error) throw ValueError(formatDiagnostic(*r.error, "<program>", text));
        KILN_CHECK_VALUE(r.programs.size() == 1, "schedule: expected one loop program, got ",
                         r.programs.size());
        std::vector<Diagnostic> problems = verifyLoopProgram(r.programs[0]);
        if (!problems.empty()) throw ValueError(formatDiagnostic(problems[0], "<program>", text));
        passes::loop::ScheduleResult s = passes::loop::schedule(r.programs[0]);
        return std::make_pair(printLoopProgram(r.programs[0]), s.logText());
      },
      nb::arg("program_text"),
      "(the loop program with its buffers fused into kernels, the scheduler's decision log)");
  registerCudaCodegen(m);
}

} // namespace kiln::python
