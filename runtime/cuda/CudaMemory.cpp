// Device allocators fed by the driver, and the driver's copy and memset calls.
#include "runtime/cuda/CudaMemory.h"

#include <cstdint>
#include <array>
#include <mutex>

#include "runtime/Error.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"

namespace kiln::cuda {
namespace {

constexpr int kMaxDevices = 64;

// Segments from cuMemAlloc on one device; out of memory is reported as 0 so that the caching
// allocator can release its cache and retry; any other failure is an error.
class DriverSegmentSource : public SegmentSource {
public:
  explicit DriverSegmentSource(int device) : device_(device) {}
  uintptr_t allocate(size_t bytes) override {
    CudaDeviceGuard guard(device_);
    CUdeviceptr ptr = 0;
    const CudaDriver& driver = CudaDriver::get();
    CUresult r = driver.api().cuMemAlloc(&ptr, bytes);
    if (r == kCudaErrorOutOfMemory) return 0;
    driver.check(r, "cuMemAlloc");
    return uintptr_t(ptr);
  }
  void free(uintptr_t ptr) override {
    CudaDeviceGuard guard(device_);
    // cuMemFree synchronizes the device, so pending work on the memory has finished.
    KILN_CUDA_CHECK(cuMemFree, CUdeviceptr(ptr));
  }

private:
  int device_;
};

std::mutex allocatorsMutex;
std::array<CudaCachingAllocator*, kMaxDevices> allocators{}; // never freed: storages outlive exit

CUdeviceptr devicePtr(const void* p) { return CUdeviceptr(reinterpret_cast<uintptr_t>(p)); }

} // namespace

CudaCachingAllocator& deviceAllocator(int index) {
  KILN_CHECK(index >= 0 && index < kMaxDevices, "CUDA device index ", index, " out of range");
  std::lock_guard<std::mutex> lock(allocatorsMutex);
  CudaCachingAllocator*& a = allocators[size_t(index)];
  if (!a)
    a = new CudaCachingAllocator(std::make_unique<DriverSegmentSource>(index),
                                 strCat("cuda:", index));
  return *a;
}

bool deviceAllocatorExists(int index) {
  std::lock_guard<std::mutex> lock(allocatorsMutex);
  return index >= 0 && index < kMaxDevices && allocators[size_t(index)];
}

void* allocateDeviceMemory(int device, size_t bytes) {
  CudaStream stream = currentStream(device);
  uintptr_t p = deviceAllocator(device).allocate(bytes, reinterpret_cast<uintptr_t>(stream.handle));
  return reinterpret_cast<void*>(p);
}

void freeDeviceMemory(int device, void* ptr) {
  deviceAllocator(device).free(reinterpret_cast<uintptr_t>(ptr));
}

void copyHostToDevice(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (!bytes) return;
  CudaDeviceGuard guard(stream.device);
  KILN_CUDA_CHECK(cuMemcpyHtoDAsync, devicePtr(dst), src, bytes, stream.handle);
  KILN_CUDA_CHECK(cuStreamSynchronize, stream.handle);
}

void copyDeviceToHost(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (!bytes) return;
  CudaDeviceGuard guard(stream.device);
  KILN_CUDA_CHECK(cuMemcpyDtoHAsync, dst, devicePtr(src), bytes, stream.handle);
  KILN_CUDA_CHECK(cuStreamSynchronize, stream.handle);
}

void copyDeviceToDevice(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (!bytes) return;
  CudaDeviceGuard guard(stream.device);
  KILN_CUDA_CHECK(cuMemcpyDtoDAsync, devicePtr(dst), devicePtr(src), bytes, stream.handle);
}

void fillDevice(void* dst, uint32_t value, size_t elementSize, size_t count, CudaStream stream) {
  if (!count) return;
  CudaDeviceGuard guard(stream.device);
  CUdeviceptr p = devicePtr(dst);
  switch (elementSize) {
  case 1: KILN_CUDA_CHECK(cuMemsetD8Async, p, (unsigned char)value, count, stream.handle); break;
  case 2: KILN_CUDA_CHECK(cuMemsetD16Async, p, (unsigned short)value, count, stream.handle); break;
  case 4: KILN_CUDA_CHECK(cuMemsetD32Async, p, unsigned(value), count, stream.handle); break;
  default: throw Error(strCat("fillDevice: element size ", elementSize, " is not 1, 2 or 4"));
  }
}

} // namespace kiln::cuda
