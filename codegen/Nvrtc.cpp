// NVRTC through dlopen (see Nvrtc.h). The handful of entry points kiln calls are looked up by
// name; their signatures are NVRTC's C API with nvrtcResult as int and nvrtcProgram as void*.
#include "codegen/Nvrtc.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>

#include "codegen/KernelCache.h"
#include "codegen/Sha256.h"

namespace kiln::codegen {

namespace {

std::vector<std::string> candidates(const std::vector<std::string>& searchDirs) {
  std::vector<std::string> c;
  if (const char* env = std::getenv("KILN_NVRTC"); env && *env) c.push_back(env);
  for (const std::string& d : searchDirs) {
    if (d.empty()) continue;
    c.push_back(d + "/nvidia/cu13/lib/libnvrtc.so.13");
    c.push_back(d + "/nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
  }
  // The toolkit's folder is not always on the loader's path (images with nvcc).
  for (const char* sys : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                          "/usr/local/cuda/lib64/libnvrtc.so.12"})
    c.push_back(sys);
  return c;
}

template <typename F> void bind(void* lib, const char* name, F& fn, const std::string& path) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  KILN_CHECK(fn, "kiln: ", path, " has no ", name, " (not an NVRTC library?)");
}

} // namespace

const Nvrtc& Nvrtc::get(const std::vector<std::string>& searchDirs) {
  static std::mutex mu;
  static std::unique_ptr<Nvrtc> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) return *loaded;
  std::string tried;
  for (const std::string& path : candidates(searchDirs)) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      tried += "\n  " + path;
      continue;
    }
    std::unique_ptr<Nvrtc> n(new Nvrtc());
    n->path_ = path;
    n->lib_ = lib;
    int (*version)(int*, int*) = nullptr;
    bind(lib, "nvrtcVersion", version, path);
    bind(lib, "nvrtcGetErrorString", n->getErrorString_, path);
    bind(lib, "nvrtcCreateProgram", n->create_, path);
    bind(lib, "nvrtcDestroyProgram", n->destroy_, path);
    bind(lib, "nvrtcCompileProgram", n->compile_, path);
    bind(lib, "nvrtcGetProgramLogSize", n->logSize_, path);
    bind(lib, "nvrtcGetProgramLog", n->log_, path);
    bind(lib, "nvrtcGetCUBINSize", n->cubinSize_, path);
    bind(lib, "nvrtcGetCUBIN", n->cubin_, path);
    bind(lib, "nvrtcGetPTXSize", n->ptxSize_, path);
    bind(lib, "nvrtcGetPTX", n->ptx_, path);
    version(&n->major_, &n->minor_);
    loaded = std::move(n);
    return *loaded;
  }
  throw Error(strCat("kiln: NVRTC not found (pip install nvidia-cuda-nvrtc, or set KILN_NVRTC to "
                     "libnvrtc.so); tried:",
                     tried));
}

bool Nvrtc::available(const std::vector<std::string>& searchDirs) {
  try {
    get(searchDirs);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string Nvrtc::version() const { return std::to_string(major_) + "." + std::to_string(minor_); }

std::string Nvrtc::compile(const std::string& source, const std::string& arch, const std::string& name,
                           const std::string& keepSourceAt) const {
  KILN_CHECK(arch.rfind("sm_", 0) == 0 || arch.rfind("compute_", 0) == 0, "kiln: NVRTC architecture '", arch,
             "': expected sm_NN (CUBIN) or compute_NN (PTX)");
  void* prog = nullptr;
  int rc = create_(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  KILN_CHECK(rc == 0, "kiln: nvrtcCreateProgram: ", getErrorString_(rc));
  struct Destroy {
    const Nvrtc* n;
    void** p;
    ~Destroy() { n->destroy_(p); }
  } destroy{this, &prog};
  std::string archFlag = "--gpu-architecture=" + arch;
  // -default-device: every function is device code unless marked; the kernels need no host.
  const char* options[] = {archFlag.c_str(), "--std=c++17", "-default-device"};
  rc = compile_(prog, 3, options);
  size_t logSize = 0;
  logSize_(prog, &logSize);
  std::string log(logSize, '\0');
  if (logSize) log_(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (rc != 0)
    throw CompileError(strCat("kiln: NVRTC ", version(), " could not compile ", name, " for ", arch, " (",
                              getErrorString_(rc), ")", keepSourceAt.empty() ? "" : "; source: " + keepSourceAt,
                              ":\n", log),
                       keepSourceAt, log);
  size_t size = 0;
  std::string out;
  if (arch.rfind("sm_", 0) == 0) {
    cubinSize_(prog, &size);
    out.resize(size);
    cubin_(prog, out.data());
  } else {
    ptxSize_(prog, &size);
    out.resize(size);
    ptx_(prog, out.data());
    while (!out.empty() && out.back() == '\0') out.pop_back();
  }
  return out;
}

CachedCubin cubinFor(const CudaProgram& program, const std::string& arch, const std::string& cacheDir,
                     const std::vector<std::string>& searchDirs) {
  const Nvrtc& nvrtc = Nvrtc::get(searchDirs);
  KILN_CHECK(arch.rfind("sm_", 0) == 0, "kiln: a CUBIN needs a real architecture (sm_NN), not '", arch, "'");
  KernelCache cache(cacheDir);
  Sha256 key;
  key.updateField("cuda-cubin");
  key.updateField(sha256Hex(program.source));
  key.updateField(arch);
  key.updateField(nvrtc.version());
  std::string k = key.hexDigest();
  if (std::optional<std::string> hit = cache.getArtifact(k)) return {std::move(*hit), true};
  std::string cubin = nvrtc.compile(program.source, arch, program.name + ".cu");
  cache.putArtifact(k, cubin);
  return {std::move(cubin), false};
}

} // namespace kiln::codegen
