// Current device per thread; primary contexts retained once per device, as the CUDA runtime API
// does, so kiln shares the context with any other CUDA library in the process.
#include "runtime/cuda/CudaDevice.h"

#include <cstdint>
#include <mutex>
#include <vector>

#include "runtime/Error.h"
#include "runtime/cuda/CudaDriver.h"

namespace kiln::cuda {
namespace {

thread_local int tlsCurrentDevice = 0;

CUcontext primaryContext(int index) {
  static std::mutex mutex;
  static std::vector<CUcontext> contexts;
  std::lock_guard<std::mutex> lock(mutex);
  const CudaDriver& driver = CudaDriver::get();
  if (contexts.empty()) contexts.resize(size_t(driver.deviceCount()), nullptr);
  CUcontext& ctx = contexts[size_t(index)];
  if (!ctx) {
    CUdevice dev = 0;
    KILN_CUDA_CHECK(cuDeviceGet, &dev, index);
    KILN_CUDA_CHECK(cuDevicePrimaryCtxRetain, &ctx, dev);
  }
  return ctx;
}

} // namespace

int currentDevice() { return tlsCurrentDevice; }

void setCurrentDevice(int index, std::string_view what) {
  index = resolveDeviceIndex(Device(DeviceType::CUDA, int8_t(index)), what);
  tlsCurrentDevice = index;
}

int resolveDeviceIndex(Device device, std::string_view what) {
  const CudaDriver& driver = requireCudaDriver(what);
  int index = device.index < 0 ? tlsCurrentDevice : device.index;
  if (index >= driver.deviceCount())
    throw Error(strCat(what, ": invalid device ordinal cuda:", index, " (this machine has ",
                       driver.deviceCount(), " CUDA device", driver.deviceCount() == 1 ? "" : "s",
                       ")"));
  return index;
}

void makeContextCurrent(int index) {
  CUcontext ctx = primaryContext(index);
  CUcontext current = nullptr;
  KILN_CUDA_CHECK(cuCtxGetCurrent, &current);
  if (current != ctx) KILN_CUDA_CHECK(cuCtxSetCurrent, ctx);
}

CudaDeviceGuard::CudaDeviceGuard(int index) : previous_(tlsCurrentDevice) {
  makeContextCurrent(index);
  tlsCurrentDevice = index;
}

CudaDeviceGuard::~CudaDeviceGuard() {
  tlsCurrentDevice = previous_;
  // Restoring the previous context can only fail if the driver is broken; a destructor must not
  // throw, and the next guarded call makes its own context current anyway.
  try {
    makeContextCurrent(previous_);
  } catch (const Error&) {
  }
}

CudaDeviceProperties deviceProperties(int index) {
  index = resolveDeviceIndex(Device(DeviceType::CUDA, int8_t(index)),
                             "kiln.cuda.get_device_properties()");
  CUdevice dev = 0;
  KILN_CUDA_CHECK(cuDeviceGet, &dev, index);
  CudaDeviceProperties p;
  char name[256] = {};
  KILN_CUDA_CHECK(cuDeviceGetName, name, int(sizeof(name) - 1), dev);
  p.name = name;
  KILN_CUDA_CHECK(cuDeviceGetAttribute, &p.major, kAttrComputeCapabilityMajor, dev);
  KILN_CUDA_CHECK(cuDeviceGetAttribute, &p.minor, kAttrComputeCapabilityMinor, dev);
  KILN_CUDA_CHECK(cuDeviceGetAttribute, &p.multiProcessorCount, kAttrMultiprocessorCount, dev);
  KILN_CUDA_CHECK(cuDeviceTotalMem, &p.totalMemory, dev);
  return p;
}

} // namespace kiln::cuda
