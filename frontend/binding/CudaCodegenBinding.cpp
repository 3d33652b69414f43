// kiln._C._codegen's CUDA functions (see CudaCodegenBinding.h). NVRTC is searched for in
// Python's sys.path (the nvidia-cuda-nvrtc wheel) besides $KILN_NVRTC and the system.
#include "frontend/binding/CudaCodegenBinding.h"

#include <cstdint>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "codegen/CudaCodegen.h"
#include "codegen/Nvrtc.h"
#include "ir/loop/Parser.h"
#include "ir/loop/Verifier.h"
#include "runtime/Error.h"

namespace nb = nanobind;

namespace kiln::python {

namespace {

std::vector<std::string> pythonPaths() {
  std::vector<std::string> dirs;
  for (nb::handle h : nb::module_::import_("sys").attr("path"))
    if (nb::isinstance<nb::str>(h)) dirs.push_back(nb::cast<std::string>(h));
  return dirs;
}

LoopProgram parseOne(std::string_view text, const char* what) {
  LoopParseResult r = parseLoopPrograms(text);
  if (r.error) throw ValueError(formatDiagnostic(*r.error, "<program>", text));
  KILN_CHECK_VALUE(r.programs.size() == 1, what, ": expected one loop program, got ", r.programs.size());
  std::vector<Diagnostic> problems = verifyLoopProgram(r.programs[0]);
  if (!problems.empty()) throw ValueError(formatDiagnostic(problems[0], "<program>", text));
  return std::move(r.programs[0]);
}

} // namespace

void registerCudaCodegen(nb::module_& m) {
  nb::module_ c = m.def_submodule("_codegen", "generated C++: code generation and compilation");
  registerCudaCompiledProgram(c);
  c.def(
      "emit_cuda",
      [](std::string_view text, std::map<std::string, int64_t> sizeHints) {
        codegen::CudaOptions options;
        options.sizeHints = std::move(sizeHints);
        codegen::CudaProgram p = codegen::emitCuda(parseOne(text, "emit_cuda"), options);
        return std::make_pair(p.source, codegen::printLaunchList(p));
      },
      nb::arg("program_text"), nb::arg("size_hints") = std::map<std::string, int64_t>(),
      "(CUDA source, launch list text) of a loop program given in its text form");
  c.def("nvrtc_available", []() { return codegen::Nvrtc::available(pythonPaths()); },
        "whether NVRTC can be loaded (the nvidia-cuda-nvrtc wheel, $KILN_NVRTC or the system's)");
  c.def(
      "nvrtc_info",
      []() {
        const codegen::Nvrtc& n = codegen::Nvrtc::get(pythonPaths());
        return std::make_pair(n.path(), n.version());
      },
      "(library path, version) of the NVRTC kiln loads; RuntimeError when there is none");
  c.def(
      "nvrtc_compile",
      [](const std::string& source, const std::string& arch, const std::string& name) {
        const codegen::Nvrtc& nvrtc = codegen::Nvrtc::get(pythonPaths());
        std::string out;
        {
          nb::gil_scoped_release release;
          out = nvrtc.compile(source, arch, name);
        }
        return nb::bytes(out.data(), out.size());
      },
      nb::arg("source"), nb::arg("arch"), nb::arg("name") = "kiln.cu",
      "CUBIN (arch sm_NN) or PTX (compute_NN) of CUDA source; RuntimeError with NVRTC's log");
  c.def(
      "cuda_cubin",
      [](std::string_view text, const std::string& arch, const std::string& cacheDir) {
        codegen::CudaProgram p = codegen::emitCuda(parseOne(text, "cuda_cubin"));
        std::vector<std::string> dirs = pythonPaths();
        codegen::CachedCubin cubin;
        {
          nb::gil_scoped_release release;
          cubin = codegen::cubinFor(p, arch, cacheDir, dirs);
        }
        return std::make_pair(nb::bytes(cubin.cubin.data(), cubin.cubin.size()), cubin.cacheHit);
      },
      nb::arg("program_text"), nb::arg("arch"), nb::arg("cache_dir") = "",
      "(CUBIN, cache hit) of a loop program's CUDA kernels for arch sm_NN, through the disk cache");
}

} // namespace kiln::python
