// The current CUDA device of each thread and the device's primary context, made current before
// any driver call that works on that device (CudaDeviceGuard).
#pragma once
#include <string>
#include <string_view>

#include "runtime/Device.h"

namespace kiln::cuda {

// This thread's current device (kiln.cuda.current_device()); 0 until set.
int currentDevice();
// Checks `index` against the device count (naming `what` on error) and makes it current.
void setCurrentDevice(int index, std::string_view what = "kiln.cuda.set_device()");
// The index a cuda device names (-1 is the current device), checked against the device count.
int resolveDeviceIndex(Device device, std::string_view what);
// Device `index`'s primary context made current on this thread (retained once per process).
void makeContextCurrent(int index);

// While alive, device `index` is current (and its context); restores the previous device.
class CudaDeviceGuard {
public:
  explicit CudaDeviceGuard(int index);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

private:
  int previous_;
};

struct CudaDeviceProperties {
  std::string name;
  int major = 0, minor = 0; // compute capability
  int multiProcessorCount = 0;
  size_t totalMemory = 0;
};
CudaDeviceProperties deviceProperties(int index);

} // namespace kiln::cuda
