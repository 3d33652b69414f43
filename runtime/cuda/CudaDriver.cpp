// Loading libcuda: dlopen, one dlsym per entry point (the versioned `_v2` names that cuda.h maps
// the plain names to), cuInit, device count. Any failure is kept as the reason CUDA is off.
#include "runtime/cuda/CudaDriver.h"

#include <dlfcn.h>

#include <cstdlib>

#include "runtime/Error.h"

namespace kiln::cuda {
namespace {

// Binds `slot` to the first of `names` the library exports.
template <typename Fn>
bool bindEntry(void* library, Fn& slot, std::initializer_list<const char*> names,
               std::string& missing) {
  for (const char* name : names) {
    if (void* p = dlsym(library, name)) {
      slot = reinterpret_cast<Fn>(p);
      return true;
    }
  }
  missing = *names.begin();
  return false;
}

const char* kNoDriverHint =
    "kiln loads the CUDA driver at run time; no NVIDIA driver on this machine";

} // namespace

const CudaDriver& CudaDriver::get() {
  // Never destroyed: storages may be freed after static destructors ran.
  static const CudaDriver* driver = [] {
    const char* override = std::getenv("KILN_CUDA_DRIVER");
    return open(override && *override ? override : "libcuda.so.1").release();
  }();
  return *driver;
}

std::unique_ptr<CudaDriver> CudaDriver::open(const std::string& library) {
  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  driver->available_ = driver->load(library);
  return driver;
}

bool CudaDriver::load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    reason_ = strCat(library, " could not be loaded (", kNoDriverHint,
                     why ? strCat(": ", why) : std::string(), ")");
    return false;
  }
  std::string missing;
  CudaDriverTable& t = api_;
  bool ok = bindEntry(handle, t.cuInit, {"cuInit"}, missing) &&
            bindEntry(handle, t.cuDriverGetVersion, {"cuDriverGetVersion"}, missing) &&
            bindEntry(handle, t.cuGetErrorName, {"cuGetErrorName"}, missing) &&
            bindEntry(handle, t.cuGetErrorString, {"cuGetErrorString"}, missing) &&
            bindEntry(handle, t.cuDeviceGet, {"cuDeviceGet"}, missing) &&
            bindEntry(handle, t.cuDeviceGetCount, {"cuDeviceGetCount"}, missing) &&
            bindEntry(handle, t.cuDeviceGetAttribute, {"cuDeviceGetAttribute"}, missing) &&
            bindEntry(handle, t.cuDeviceGetName, {"cuDeviceGetName"}, missing) &&
            bindEntry(handle, t.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"}, missing) &&
            bindEntry(handle, t.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, missing) &&
            bindEntry(handle, t.cuCtxSetCurrent, {"cuCtxSetCurrent"}, missing) &&
            bindEntry(handle, t.cuCtxGetCurrent, {"cuCtxGetCurrent"}, missing) &&
            bindEntry(handle, t.cuCtxSynchronize, {"cuCtxSynchronize"}, missing) &&
            bindEntry(handle, t.cuMemAlloc, {"cuMemAlloc_v2"}, missing) &&
            bindEntry(handle, t.cuMemFree, {"cuMemFree_v2"}, missing) &&
            bindEntry(handle, t.cuMemGetInfo, {"cuMemGetInfo_v2"}, missing) &&
            bindEntry(handle, t.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"}, missing) &&
            bindEntry(handle, t.cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"}, missing) &&
            bindEntry(handle, t.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"}, missing) &&
            bindEntry(handle, t.cuMemsetD8Async, {"cuMemsetD8Async"}, missing) &&
            bindEntry(handle, t.cuMemsetD16Async, {"cuMemsetD16Async"}, missing) &&
            bindEntry(handle, t.cuMemsetD32Async, {"cuMemsetD32Async"}, missing) &&
            bindEntry(handle, t.cuStreamCreate, {"cuStreamCreate"}, missing) &&
            bindEntry(handle, t.cuStreamDestroy, {"cuStreamDestroy_v2"}, missing) &&
            bindEntry(handle, t.cuStreamSynchronize, {"cuStreamSynchronize"}, missing) &&
            bindEntry(handle, t.cuStreamQuery, {"cuStreamQuery"}, missing) &&
            bindEntry(handle, t.cuStreamWaitEvent, {"cuStreamWaitEvent"}, missing) &&
            bindEntry(handle, t.cuEventCreate, {"cuEventCreate"}, missing) &&
            bindEntry(handle, t.cuEventRecord, {"cuEventRecord"}, missing) &&
            bindEntry(handle, t.cuEventSynchronize, {"cuEventSynchronize"}, missing) &&
            bindEntry(handle, t.cuEventQuery, {"cuEventQuery"}, missing) &&
            // CUDA 12.8 added the _v2 (same signature); CUDA 13's cuda.h maps the plain name to it.
            bindEntry(handle, t.cuEventElapsedTime,
                      {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, missing) &&
            bindEntry(handle, t.cuEventDestroy, {"cuEventDestroy_v2"}, missing) &&
            bindEntry(handle, t.cuModuleLoadData, {"cuModuleLoadData"}, missing) &&
            bindEntry(handle, t.cuModuleGetFunction, {"cuModuleGetFunction"}, missing) &&
            bindEntry(handle, t.cuModuleUnload, {"cuModuleUnload"}, missing) &&
            bindEntry(handle, t.cuFuncSetAttribute, {"cuFuncSetAttribute"}, missing) &&
            bindEntry(handle, t.cuLaunchKernel, {"cuLaunchKernel"}, missing) &&
            bindEntry(handle, t.cuStreamBeginCapture, {"cuStreamBeginCapture_v2"}, missing) &&
            bindEntry(handle, t.cuStreamEndCapture, {"cuStreamEndCapture"}, missing) &&
            // CUDA 12's cuda.h maps cuGraphInstantiate to cuGraphInstantiateWithFlags.
            bindEntry(handle, t.cuGraphInstantiate, {"cuGraphInstantiateWithFlags"}, missing) &&
            bindEntry(handle, t.cuGraphLaunch, {"cuGraphLaunch"}, missing) &&
            bindEntry(handle, t.cuGraphExecDestroy, {"cuGraphExecDestroy"}, missing) &&
            bindEntry(handle, t.cuGraphDestroy, {"cuGraphDestroy"}, missing);
  if (!ok) {
    reason_ = strCat(library, " lacks the entry point ", missing,
                     " (kiln needs a CUDA 12 or newer driver)");
    return false;
  }
  if (CUresult r = t.cuInit(0); r != kCudaSuccess) {
    reason_ = strCat("cuInit failed: ", describe(r));
    return false;
  }
  t.cuDriverGetVersion(&driverVersion_);
  if (CUresult r = t.cuDeviceGetCount(&deviceCount_); r != kCudaSuccess) {
    reason_ = strCat("cuDeviceGetCount failed: ", describe(r));
    return false;
  }
  if (deviceCount_ == 0) {
    reason_ = "the CUDA driver found no device";
    return false;
  }
  return true;
}

std::string CudaDriver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName) api_.cuGetErrorName(result, &name);
  if (api_.cuGetErrorString) api_.cuGetErrorString(result, &text);
  std::string out = name ? name : strCat("CUDA error ", result);
  if (text) out += strCat(" (", text, ")");
  return out;
}

void CudaDriver::check(CUresult result, const char* call) const {
  if (result != kCudaSuccess) [[unlikely]]
    throw Error(strCat(call, " failed: ", describe(result)));
}

const CudaDriver& requireCudaDriver(std::string_view what) {
  const CudaDriver& driver = CudaDriver::get();
  if (!driver.available()) [[unlikely]]
    throw Error(strCat(what, ": CUDA is not available: ", driver.unavailableReason()));
  return driver;
}

} // namespace kiln::cuda
