// A fake libcuda for tests on machines without a GPU: kiln loads it through $KILN_CUDA_DRIVER and
// so runs its CUDA tensor plumbing (driver loading, contexts, streams, events, the caching
// allocator, copies and fills) for real. "Device memory" is host memory moved by kBias to a
// non-canonical address: host code that dereferences a device pointer by mistake crashes instead
// of passing. Every copy and fill checks that its range lies inside one live allocation. Work
// runs synchronously.
//
// Kernels run on the CPU: the same library is a fake NVRTC (kiln loads it through $KILN_NVRTC)
// whose "CUBIN" carries the CUDA source (FakeNvrtc.cpp), and cuModuleLoadData builds that
// source against the CUDA emulator (cuda_emulator.h: a host thread per CUDA thread) with the
// system C++ compiler; cuLaunchKernel runs it with the launch's grid, block and arguments, the
// device pointers translated to host addresses. It is also a fake cuBLAS ($KILN_CUBLAS,
// FakeCublas.cpp) computing GEMMs on the host memory behind device pointers.
// CUDA graphs: a stream in capture records the copies, fills, kernel launches (their parameters
// copied) and cuBLAS GEMMs queued on it; launching the instantiated graph runs them in order. As
// on a GPU, the capturing thread may not allocate, free or synchronize (CU_STREAM_CAPTURE_MODE_
// THREAD_LOCAL): such a call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the
// capture, so code that would break a real capture breaks here too. kiln_fake_cuda_counts()
// reports the kernels run and the graphs launched (tests read it through ctypes).
// Knobs: KILN_FAKE_CUDA_DEVICES (default 1), KILN_FAKE_CUDA_MEMORY (bytes per device, 1 GiB).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "test/fake_cuda/FakeCuda.h"

extern "C" {
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
}

namespace {

constexpr CUresult kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kNotInitialized = 3,
                   kInvalidDevice = 101, kInvalidImage = 200, kInvalidContext = 201,
                   kInvalidHandle = 400, kIllegalState = 401, kNotFound = 500, kNotReady = 600,
                   kLaunchFailed = 719, kNotSupported = 801, kCaptureUnsupported = 900,
                   kCaptureInvalidated = 901;
using kiln::fake_cuda::kBias;

struct Allocation {
  size_t bytes;
  int device;
};

struct State {
  std::mutex mutex;
  bool initialized = false;
  int devices = 1;
  size_t capacity = size_t(1) << 30;
  size_t used[16] = {};
  std::map<uintptr_t, Allocation> live; // host address -> allocation
  int contexts[16] = {};
};

State& state() {
  static State* s = new State();
  return *s;
}

thread_local CUcontext currentContext = nullptr;

int contextDevice(CUcontext c) {
  State& s = state();
  for (int i = 0; i < s.devices; ++i)
    if (c == reinterpret_cast<CUcontext>(&s.contexts[i])) return i;
  return -1;
}

} // namespace

// The host address of [ptr, ptr + bytes) when it lies inside one live allocation.
char* kiln::fake_cuda::hostRange(CUdeviceptr ptr, size_t bytes) {
  if (ptr < kBias) return nullptr;
  uintptr_t host = uintptr_t(ptr) - kBias;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.live.upper_bound(host);
  if (it == s.live.begin()) return nullptr;
  --it;
  if (host + bytes > it->first + it->second.bytes) return nullptr;
  return reinterpret_cast<char*>(host);
}

namespace {
using kiln::fake_cuda::hostRange;

// A captured graph: the recorded work, in stream order.
struct FakeGraph {
  std::vector<std::function<bool()>> nodes;
};

struct Capture {
  std::shared_ptr<FakeGraph> graph = std::make_shared<FakeGraph>();
  bool invalidated = false;
};

// Streams in capture (a stream handle is unique while it lives), and how many this thread began.
std::mutex captureMutex;
std::map<CUstream, Capture> captures;
thread_local int capturesOnThread = 0;
long long kernelsRun = 0, graphsLaunched = 0;

// A call the capturing thread may not make: fails and invalidates this thread's captures (the
// fake does not tell threads apart in `captures`: kiln captures on one thread at a time).
bool forbiddenDuringCapture() {
  if (capturesOnThread == 0) return false;
  std::lock_guard<std::mutex> lock(captureMutex);
  for (auto& [stream, capture] : captures) capture.invalidated = true;
  return true;
}

struct FakeEvent {
  double ms = 0;
  bool recorded = false;
  unsigned flags = 0;
};

template <typename T> CUresult fill(CUdeviceptr dst, T value, size_t count) {
  char* d = hostRange(dst, count * sizeof(T));
  if (!d) return kInvalidValue;
  for (size_t i = 0; i < count; ++i)
    std::memcpy(d + i * sizeof(T), &value, sizeof(T));
  return kSuccess;
}

double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Work on a stream in capture is recorded; elsewhere it runs now. Returns its CUresult.
CUresult runOrRecord(CUstream stream, std::function<bool()> work, CUresult failure = kInvalidValue) {
  if (kiln::fake_cuda::recordIfCapturing(stream, work)) return kSuccess;
  return work() ? kSuccess : failure;
}

template <typename T> CUresult fillOn(CUstream stream, CUdeviceptr dst, T v, size_t n) {
  if (!hostRange(dst, n * sizeof(T))) return kInvalidValue;
  return runOrRecord(stream, [=] { return fill(dst, v, n) == kSuccess; });
}

} // namespace

bool kiln::fake_cuda::recordIfCapturing(void* stream, std::function<bool()> work) {
  std::lock_guard<std::mutex> lock(captureMutex);
  auto it = captures.find(static_cast<CUstream>(stream));
  if (it == captures.end()) return false;
  it->second.graph->nodes.push_back(std::move(work));
  return true;
}

extern "C" {

CUresult cuInit(unsigned flags) {
  if (flags != 0) return kInvalidValue;
  State& s = state();
  if (const char* n = std::getenv("KILN_FAKE_CUDA_DEVICES")) s.devices = std::atoi(n);
  if (const char* m = std::getenv("KILN_FAKE_CUDA_MEMORY"))
    s.capacity = std::strtoull(m, nullptr, 10);
  if (s.devices < 0 || s.devices > 16) s.devices = 1;
  s.initialized = true;
  return kSuccess;
}

CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return kSuccess;
}

CUresult cuGetErrorName(CUresult e, const char** name) {
  switch (e) {
  case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
  case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
  case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
  case kNotInitialized: *name = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
  case kInvalidDevice: *name = "CUDA_ERROR_INVALID_DEVICE"; return kSuccess;
  case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
  case kInvalidContext: *name = "CUDA_ERROR_INVALID_CONTEXT"; return kSuccess;
  case kInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; return kSuccess;
  case kIllegalState: *name = "CUDA_ERROR_ILLEGAL_STATE"; return kSuccess;
  case kCaptureUnsupported: *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return kSuccess;
  case kCaptureInvalidated: *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; return kSuccess;
  case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
  case kNotReady: *name = "CUDA_ERROR_NOT_READY"; return kSuccess;
  case kLaunchFailed: *name = "CUDA_ERROR_LAUNCH_FAILED"; return kSuccess;
  case kNotSupported: *name = "CUDA_ERROR_NOT_SUPPORTED"; return kSuccess;
  default: *name = nullptr; return kInvalidValue;
  }
}

CUresult cuGetErrorString(CUresult e, const char** text) {
  switch (e) {
  case kInvalidValue: *text = "invalid argument"; return kSuccess;
  case kOutOfMemory: *text = "out of memory"; return kSuccess;
  case kInvalidImage:
    *text = "device kernel image is invalid (not a CUBIN of the fake NVRTC, or its source does not build "
            "on the emulator)";
    return kSuccess;
  case kNotFound: *text = "named symbol not found"; return kSuccess;
  case kLaunchFailed: *text = "unspecified launch failure"; return kSuccess;
  case kNotSupported: *text = "operation not supported (by the fake driver)"; return kSuccess;
  case kCaptureUnsupported: *text = "operation not permitted when stream is capturing"; return kSuccess;
  case kCaptureInvalidated:
    *text = "operation failed due to a previous error during capture";
    return kSuccess;
  default: *text = "fake driver error"; return kSuccess;
  }
}

CUresult cuDeviceGetCount(int* n) {
  if (!state().initialized) return kNotInitialized;
  *n = state().devices;
  return kSuccess;
}

CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= state().devices) return kInvalidDevice;
  *d = ordinal;
  return kSuccess;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice d) {
  if (d < 0 || d >= state().devices) return kInvalidDevice;
  switch (attribute) {
  case 16: *value = 132; return kSuccess; // multiprocessors
  case 75: *value = 9; return kSuccess;   // compute capability 9.0
  case 76: *value = 0; return kSuccess;
  default: return kInvalidValue;
  }
}

CUresult cuDeviceGetName(char* name, int length, CUdevice d) {
  if (d < 0 || d >= state().devices) return kInvalidDevice;
  std::strncpy(name, "kiln fake CUDA device", size_t(length));
  return kSuccess;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
  if (d < 0 || d >= state().devices) return kInvalidDevice;
  *bytes = state().capacity;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  if (d < 0 || d >= state().devices) return kInvalidDevice;
  *c = reinterpret_cast<CUcontext>(&state().contexts[d]);
  return kSuccess;
}

CUresult cuCtxSetCurrent(CUcontext c) {
  if (c && contextDevice(c) < 0) return kInvalidContext;
  currentContext = c;
  return kSuccess;
}

CUresult cuCtxGetCurrent(CUcontext* c) {
  *c = currentContext;
  return kSuccess;
}

CUresult cuCtxSynchronize() {
  if (forbiddenDuringCapture()) return kCaptureUnsupported;
  return currentContext ? kSuccess : kInvalidContext;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  int device = contextDevice(currentContext);
  if (device < 0) return kInvalidContext;
  if (bytes == 0) return kInvalidValue;
  if (forbiddenDuringCapture()) return kCaptureUnsupported;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.used[device] + bytes > s.capacity) return kOutOfMemory;
  void* host = std::malloc(bytes);
  if (!host) return kOutOfMemory;
  s.used[device] += bytes;
  s.live[uintptr_t(host)] = {bytes, device};
  *ptr = CUdeviceptr(uintptr_t(host) + kBias);
  return kSuccess;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (forbiddenDuringCapture()) return kCaptureUnsupported;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.live.find(uintptr_t(ptr) - kBias);
  if (ptr < kBias || it == s.live.end()) return kInvalidValue;
  s.used[it->second.device] -= it->second.bytes;
  std::free(reinterpret_cast<void*>(it->first));
  s.live.erase(it);
  return kSuccess;
}

CUresult cuMemGetInfo_v2(size_t* freeBytes, size_t* total) {
  int device = contextDevice(currentContext);
  if (device < 0) return kInvalidContext;
  *total = state().capacity;
  *freeBytes = state().capacity - state().used[device];
  return kSuccess;
}

// Host copies are not captured (pageable host memory: CUDA refuses them in a capture too).
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream) {
  if (forbiddenDuringCapture()) return kCaptureUnsupported;
  char* d = hostRange(dst, bytes);
  if (!d || !src) return kInvalidValue;
  std::memcpy(d, src, bytes);
  return kSuccess;
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream) {
  if (forbiddenDuringCapture()) return kCaptureUnsupported;
  char* s = hostRange(src, bytes);
  if (!s || !dst) return kInvalidValue;
  std::memcpy(dst, s, bytes);
  return kSuccess;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (!hostRange(dst, bytes) || !hostRange(src, bytes)) return kInvalidValue;
  return runOrRecord(stream, [=] {
    char* d = hostRange(dst, bytes);
    char* s = hostRange(src, bytes);
    if (!d || !s) return false;
    std::memmove(d, s, bytes);
    return true;
  });
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream stream) {
  return fillOn(stream, dst, v, n);
}
CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream stream) {
  return fillOn(stream, dst, v, n);
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream stream) {
  return fillOn(stream, dst, v, n);
}

CUresult cuStreamCreate(CUstream* stream, unsigned) {
  if (!currentContext) return kInvalidContext;
  *stream = reinterpret_cast<CUstream>(new int(0));
  return kSuccess;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  delete reinterpret_cast<int*>(stream);
  return kSuccess;
}

CUresult cuStreamSynchronize(CUstream) {
  if (forbiddenDuringCapture()) return kCaptureUnsupported;
  return currentContext ? kSuccess : kInvalidContext;
}
CUresult cuStreamQuery(CUstream) { return kSuccess; }
CUresult cuStreamWaitEvent(CUstream, CUevent e, unsigned) { return e ? kSuccess : kInvalidHandle; }

CUresult cuEventCreate(CUevent* e, unsigned flags) {
  if (!currentContext) return kInvalidContext;
  auto* ev = new FakeEvent();
  ev->flags = flags;
  *e = reinterpret_cast<CUevent>(ev);
  return kSuccess;
}

CUresult cuEventRecord(CUevent e, CUstream) {
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  ev->ms = nowMs();
  ev->recorded = true;
  return kSuccess;
}

CUresult cuEventSynchronize(CUevent) { return kSuccess; }
CUresult cuEventQuery(CUevent) { return kSuccess; }

CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  auto* a = reinterpret_cast<FakeEvent*>(start);
  auto* b = reinterpret_cast<FakeEvent*>(end);
  if ((a->flags | b->flags) & 2u) return kInvalidHandle; // timing disabled
  if (!a->recorded || !b->recorded) return kInvalidHandle;
  *ms = float(b->ms - a->ms);
  return kSuccess;
}

CUresult cuEventDestroy_v2(CUevent e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return kSuccess;
}

// Modules: the fake NVRTC's image, built on the emulator (FakeKernels.cpp).
CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (!currentContext || !module || !image) return currentContext ? kInvalidValue : kInvalidContext;
  void* m = kiln::fake_cuda::loadModule(static_cast<const char*>(image));
  if (!m) return kInvalidImage;
  *module = reinterpret_cast<CUmodule>(m);
  return kSuccess;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (!module || !function || !name) return kInvalidHandle;
  void* f = kiln::fake_cuda::moduleFunction(module, name);
  if (!f) return kNotFound;
  *function = reinterpret_cast<CUfunction>(f);
  return kSuccess;
}

CUresult cuModuleUnload(CUmodule module) {
  if (!module) return kInvalidHandle;
  kiln::fake_cuda::unloadModule(module);
  return kSuccess;
}

CUresult cuFuncSetAttribute(CUfunction f, int, int) { return f ? kSuccess : kInvalidHandle; }

// Runs the kernel at once (streams are synchronous). The generated kernels are 1-D and use no
// dynamic shared memory: anything else is refused rather than run differently from a GPU.
CUresult cuLaunchKernel(CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                        unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream, void** params,
                        void** extra) {
  if (!currentContext) return kInvalidContext;
  if (!f) return kInvalidHandle;
  if (gridX == 0 || blockX == 0 || blockX > 1024 || extra) return kInvalidValue;
  if (gridY != 1 || gridZ != 1 || blockY != 1 || blockZ != 1 || sharedBytes != 0) return kNotSupported;
  // The parameters' values are copied now, as cuLaunchKernel does: the caller may reuse them.
  std::vector<std::vector<char>> values;
  for (unsigned size : kiln::fake_cuda::paramSizes(f)) {
    const char* p = static_cast<const char*>(*params++);
    values.emplace_back(p, p + size);
  }
  return runOrRecord(
      stream,
      [f, gridX, blockX, values = std::move(values)]() mutable {
        std::vector<void*> args;
        for (auto& v : values) args.push_back(v.data());
        ++kernelsRun;
        return kiln::fake_cuda::launch(f, gridX, blockX, args.data());
      },
      kLaunchFailed);
}

// Stream capture and graphs. Modes: 0 global, 1 thread local, 2 relaxed (all treated as thread
// local: kiln captures on one thread).
CUresult cuStreamBeginCapture_v2(CUstream stream, int mode) {
  if (mode < 0 || mode > 2) return kInvalidValue;
  if (!stream) return kCaptureUnsupported; // the legacy NULL stream cannot capture
  std::lock_guard<std::mutex> lock(captureMutex);
  if (!captures.emplace(stream, Capture()).second) return kIllegalState;
  ++capturesOnThread;
  return kSuccess;
}

CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  std::lock_guard<std::mutex> lock(captureMutex);
  auto it = captures.find(stream);
  if (it == captures.end()) return kIllegalState;
  Capture capture = std::move(it->second);
  captures.erase(it);
  --capturesOnThread;
  *graph = nullptr;
  if (capture.invalidated) return kCaptureInvalidated;
  *graph = reinterpret_cast<CUgraph>(new FakeGraph(*capture.graph));
  return kSuccess;
}

CUresult cuStreamIsCapturing(CUstream stream, int* status) {
  std::lock_guard<std::mutex> lock(captureMutex);
  auto it = captures.find(stream);
  *status = it == captures.end() ? 0 : it->second.invalidated ? 2 : 1;
  return kSuccess;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (!exec || !graph) return kInvalidValue;
  *exec = reinterpret_cast<CUgraphExec>(new FakeGraph(*reinterpret_cast<FakeGraph*>(graph)));
  return kSuccess;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (!exec) return kInvalidValue;
  if (!currentContext) return kInvalidContext;
  auto* g = reinterpret_cast<FakeGraph*>(exec);
  {
    std::lock_guard<std::mutex> lock(captureMutex);
    if (captures.count(stream)) return kNotSupported; // a graph launched into a capture
  }
  ++graphsLaunched;
  for (auto& node : g->nodes)
    if (!node()) return kLaunchFailed;
  return kSuccess;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<FakeGraph*>(exec);
  return kSuccess;
}

CUresult cuGraphDestroy(CUgraph graph) {
  delete reinterpret_cast<FakeGraph*>(graph);
  return kSuccess;
}

// For tests: [kernels run (directly or by a graph), graphs launched].
void kiln_fake_cuda_counts(long long* out) {
  out[0] = kernelsRun;
  out[1] = graphsLaunched;
}

} // extern "C"
