// The fake NVRTC and the fake driver's modules: generated CUDA source built against the CUDA
// emulator (cuda_emulator.h) by the system C++ compiler and run on host threads.
//
// nvrtcCompileProgram builds the source (so a kernel that does not compile fails there, with
// the compiler's output as NVRTC's log) and its "CUBIN" is kCubinMagic, the architecture and the
// source; cuModuleLoadData builds that source again (a cache hit: shared objects are cached on
// disk by content, in $KILN_FAKE_CUDA_CACHE or /tmp/kiln-fake-cuda-<uid>) and dlopens it.
#include <cstdint>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "test/fake_cuda/FakeCuda.h"

namespace kiln::fake_cuda {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

uint64_t fnv1a(const std::string& text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string cacheDir() {
  if (const char* d = std::getenv("KILN_FAKE_CUDA_CACHE"); d && *d) return d;
  return "/tmp/kiln-fake-cuda-" + std::to_string(getuid());
}

// One launcher per kernel of the source, `emu_<name>(grid, block, args)`; a kernel whose body
// has a barrier or a shuffle runs its threads concurrently (cuda_emulator.h).
std::string launchers(const std::string& source) {
  const std::string head = "extern \"C\" __global__ void __launch_bounds__(";
  std::vector<std::pair<size_t, std::string>> kernels; // (body start, name)
  for (size_t at = source.find(head); at != std::string::npos; at = source.find(head, at + 1)) {
    size_t close = source.find(") ", at + head.size());
    size_t paren = source.find('(', close + 2);
    if (close == std::string::npos || paren == std::string::npos) break;
    kernels.emplace_back(paren, source.substr(close + 2, paren - close - 2));
  }
  std::string out;
  for (size_t i = 0; i < kernels.size(); ++i) {
    size_t end = i + 1 < kernels.size() ? kernels[i + 1].first : source.size();
    std::string body = source.substr(kernels[i].first, end - kernels[i].first);
    bool syncs = body.find("__sync") != std::string::npos || body.find("kiln_shfl") != std::string::npos;
    const std::string& n = kernels[i].second;
    out += "extern \"C\" void emu_" + n + "(unsigned g, unsigned b, void** a) { kiln_emu_launch(" + n +
           ", g, b, a, " + (syncs ? "true" : "false") + "); }\n";
    out += "extern \"C\" unsigned emusz_" + n + "(unsigned* s) { return kiln_emu_param_sizes(" + n + ", s); }\n";
  }
  return out;
}

std::mutex buildMutex;

} // namespace

std::string buildEmulated(const std::string& source, std::string& log) {
  std::lock_guard<std::mutex> lock(buildMutex);
  const std::string header = KILN_FAKE_CUDA_EMULATOR_HEADER;
  std::string text = "#define KILN_EMU_BIAS " + std::to_string(uint64_t(kBias)) + "ull\n#include \"" + header +
                     "\"\n" + source + launchers(source);
  char key[17];
  std::snprintf(key, sizeof key, "%016llx", (unsigned long long)fnv1a(readFile(header), fnv1a(text)));
  std::string dir = cacheDir();
  std::string lib = dir + "/" + key + ".so";
  if (access(lib.c_str(), R_OK) == 0) return lib;
  std::string mk = "mkdir -p '" + dir + "'";
  if (std::system(mk.c_str()) != 0) {
    log = "cannot create " + dir;
    return "";
  }
  std::string pid = std::to_string(getpid());
  std::string src = dir + "/" + key + "." + pid + ".cpp", tmp = dir + "/" + key + "." + pid + ".so";
  std::ofstream(src) << text;
  const char* cxx = std::getenv("KILN_CXX");
  std::string cmd = std::string(cxx && *cxx ? cxx : "c++") +
                    " -std=c++20 -O1 -shared -fPIC -w -pthread '" + src + "' -o '" + tmp + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  log.clear();
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) log.append(buf, n);
  int rc = p ? pclose(p) : -1;
  std::remove(src.c_str());
  if (rc != 0) {
    std::remove(tmp.c_str());
    if (log.empty()) log = "the C++ compiler failed: " + cmd;
    return "";
  }
  std::rename(tmp.c_str(), lib.c_str());
  return lib;
}

namespace {

using Launcher = void (*)(unsigned, unsigned, void**);
using ParamSizer = unsigned (*)(unsigned*);

struct FakeFunction {
  Launcher launch;
  ParamSizer paramSizes;
};

struct FakeModule {
  void* library;
  std::map<std::string, FakeFunction> functions;
};

} // namespace

void* loadModule(const char* image) {
  size_t magic = std::strlen(kCubinMagic);
  if (std::strncmp(image, kCubinMagic, magic) != 0) return nullptr;
  const char* source = std::strchr(image + magic, '\n'); // after the architecture's line
  if (!source) return nullptr;
  std::string log;
  std::string lib = buildEmulated(source + 1, log);
  if (lib.empty()) return nullptr;
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return nullptr;
  return new FakeModule{handle, {}};
}

void* moduleFunction(void* module, const char* name) {
  auto* m = static_cast<FakeModule*>(module);
  auto it = m->functions.find(name);
  if (it != m->functions.end()) return &it->second;
  auto launcher = reinterpret_cast<Launcher>(dlsym(m->library, (std::string("emu_") + name).c_str()));
  auto sizer = reinterpret_cast<ParamSizer>(dlsym(m->library, (std::string("emusz_") + name).c_str()));
  if (!launcher || !sizer) return nullptr;
  return &m->functions.emplace(name, FakeFunction{launcher, sizer}).first->second;
}

std::vector<unsigned> paramSizes(void* function) {
  unsigned sizes[256];
  unsigned n = static_cast<FakeFunction*>(function)->paramSizes(sizes);
  return std::vector<unsigned>(sizes, sizes + n);
}

void unloadModule(void* module) {
  auto* m = static_cast<FakeModule*>(module);
  dlclose(m->library);
  delete m;
}

bool launch(void* function, unsigned grid, unsigned block, void** params) {
  if (!function) return false;
  static_cast<FakeFunction*>(function)->launch(grid, block, params);
  return true;
}

} // namespace kiln::fake_cuda

// The fake NVRTC: the entry points kiln's codegen/Nvrtc.cpp binds (nvrtcResult is an int,
// nvrtcProgram a pointer).
namespace {

constexpr int kNvrtcSuccess = 0, kNvrtcInvalidInput = 3, kNvrtcInvalidProgram = 4, kNvrtcInvalidOption = 5,
              kNvrtcCompilation = 6;

struct FakeProgram {
  std::string source, arch, log, image;
};

} // namespace

extern "C" {

int nvrtcVersion(int* major, int* minor) {
  // Not a real NVRTC version: CUBINs cached by kiln under the fake's version never meet real ones.
  *major = 0;
  *minor = 1;
  return kNvrtcSuccess;
}

const char* nvrtcGetErrorString(int result) {
  switch (result) {
  case kNvrtcSuccess: return "NVRTC_SUCCESS";
  case kNvrtcInvalidInput: return "NVRTC_ERROR_INVALID_INPUT";
  case kNvrtcInvalidProgram: return "NVRTC_ERROR_INVALID_PROGRAM";
  case kNvrtcInvalidOption: return "NVRTC_ERROR_INVALID_OPTION";
  case kNvrtcCompilation: return "NVRTC_ERROR_COMPILATION";
  default: return "NVRTC_ERROR (fake NVRTC)";
  }
}

int nvrtcCreateProgram(void** prog, const char* source, const char*, int numHeaders, const char* const*,
                       const char* const*) {
  if (!prog || !source || numHeaders != 0) return kNvrtcInvalidInput;
  *prog = new FakeProgram{source, "", "", ""};
  return kNvrtcSuccess;
}

int nvrtcDestroyProgram(void** prog) {
  if (!prog || !*prog) return kNvrtcInvalidProgram;
  delete static_cast<FakeProgram*>(*prog);
  *prog = nullptr;
  return kNvrtcSuccess;
}

int nvrtcCompileProgram(void* prog, int numOptions, const char* const* options) {
  auto* p = static_cast<FakeProgram*>(prog);
  if (!p) return kNvrtcInvalidProgram;
  const std::string flag = "--gpu-architecture=";
  for (int i = 0; i < numOptions; ++i)
    if (std::strncmp(options[i], flag.c_str(), flag.size()) == 0) p->arch = options[i] + flag.size();
  if (p->arch.rfind("sm_", 0) != 0 && p->arch.rfind("compute_", 0) != 0) {
    p->log = "fake NVRTC: no --gpu-architecture=sm_NN or compute_NN option";
    return kNvrtcInvalidOption;
  }
  if (kiln::fake_cuda::buildEmulated(p->source, p->log).empty()) return kNvrtcCompilation;
  p->image = std::string(kiln::fake_cuda::kCubinMagic) + p->arch + "\n" + p->source;
  return kNvrtcSuccess;
}

int nvrtcGetProgramLogSize(void* prog, size_t* size) {
  *size = static_cast<FakeProgram*>(prog)->log.size() + 1;
  return kNvrtcSuccess;
}

int nvrtcGetProgramLog(void* prog, char* log) {
  const std::string& l = static_cast<FakeProgram*>(prog)->log;
  std::memcpy(log, l.c_str(), l.size() + 1);
  return kNvrtcSuccess;
}

int nvrtcGetCUBINSize(void* prog, size_t* size) {
  *size = static_cast<FakeProgram*>(prog)->image.size();
  return kNvrtcSuccess;
}

int nvrtcGetCUBIN(void* prog, char* out) {
  const std::string& image = static_cast<FakeProgram*>(prog)->image;
  std::memcpy(out, image.data(), image.size());
  return kNvrtcSuccess;
}

int nvrtcGetPTXSize(void* prog, size_t* size) {
  *size = static_cast<FakeProgram*>(prog)->image.size() + 1;
  return kNvrtcSuccess;
}

int nvrtcGetPTX(void* prog, char* out) {
  const std::string& image = static_cast<FakeProgram*>(prog)->image;
  std::memcpy(out, image.c_str(), image.size() + 1);
  return kNvrtcSuccess;
}

} // extern "C"
