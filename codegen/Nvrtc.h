// NVRTC, loaded at run time (dlopen; nothing CUDA at link time): CUDA C++ source -> CUBIN for
// one GPU architecture, or PTX for a virtual one, and the CUBINs of generated programs cached on
// disk like CPU kernels (docs/cuda-codegen.md).
//
// The library is found in this order: $KILN_NVRTC (a path), the `nvidia-cuda-nvrtc` wheel in a
// Python search path (<dir>/nvidia/cu13/lib/libnvrtc.so.13, <dir>/nvidia/cuda_nvrtc/lib/
// libnvrtc.so.12), then the system's (libnvrtc.so.13, .12, libnvrtc.so, and in /usr/local/cuda/lib64).
#pragma once
#include <string>
#include <vector>

#include "codegen/CudaCodegen.h"
#include "codegen/Toolchain.h"

namespace kiln::codegen {

class Nvrtc {
public:
  // The process's NVRTC, loaded on first use from the places above (`searchDirs`: Python's
  // sys.path); a RuntimeError naming every place tried when there is none.
  static const Nvrtc& get(const std::vector<std::string>& searchDirs = {});
  // Whether get() would succeed.
  static bool available(const std::vector<std::string>& searchDirs = {});

  const std::string& path() const { return path_; }
  // "13.5" (nvrtcVersion).
  std::string version() const;

  // CUBIN for a real architecture ("sm_80", "sm_90"); PTX text for a virtual one
  // ("compute_80"). A failed compile throws CompileError with NVRTC's log (the source is kept
  // in the message's path when `keepSourceAt` is given).
  std::string compile(const std::string& source, const std::string& arch, const std::string& name = "kiln.cu",
                      const std::string& keepSourceAt = "") const;

private:
  Nvrtc() = default;
  std::string path_;
  void* lib_ = nullptr;
  int major_ = 0, minor_ = 0;
  // The entry points (nvrtcResult is an int; nvrtcProgram a pointer).
  const char* (*getErrorString_)(int) = nullptr;
  int (*create_)(void**, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy_)(void**) = nullptr;
  int (*compile_)(void*, int, const char* const*) = nullptr;
  int (*logSize_)(void*, size_t*) = nullptr;
  int (*log_)(void*, char*) = nullptr;
  int (*cubinSize_)(void*, size_t*) = nullptr;
  int (*cubin_)(void*, char*) = nullptr;
  int (*ptxSize_)(void*, size_t*) = nullptr;
  int (*ptx_)(void*, char*) = nullptr;
};

// The CUBIN of `program` for `arch` ("sm_90"): from the disk cache of `cacheDir` ("" is the
// kernel cache's default, KernelCache::defaultDir), else compiled by NVRTC and stored. The key is
// the source's SHA-256, the architecture, NVRTC's version and kiln's.
struct CachedCubin {
  std::string cubin;
  bool cacheHit = false;
};
CachedCubin cubinFor(const CudaProgram& program, const std::string& arch, const std::string& cacheDir = "",
                     const std::vector<std::string>& searchDirs = {});

} // namespace kiln::codegen
