// A loaded CUDA module (a CUBIN or PTX image from NVRTC) and launches of its kernels: what the
// code generator's CUDA programs call.
#pragma once
#include <string>
#include <string_view>

#include "runtime/cuda/CudaStream.h"

namespace kiln::cuda {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned sharedMemBytes = 0; // dynamic shared memory per block
  CudaStream stream;
};

// A kernel of a loaded module; valid while its module lives.
class CudaKernel {
public:
  CudaKernel(CUfunction function, int device, std::string name)
      : function_(function), device_(device), name_(std::move(name)) {}
  // Lets launches ask for more than the default 48 KiB of dynamic shared memory.
  void setMaxDynamicSharedMemory(int bytes) const;
  // Queues the kernel on config.stream; args[i] points at the i-th parameter's value.
  void launch(const LaunchConfig& config, void** args) const;
  const std::string& name() const { return name_; }

private:
  CUfunction function_;
  int device_;
  std::string name_;
};

class CudaModule {
public:
  // Loads `image` (CUBIN, fatbin or NUL-terminated PTX) into device `device`'s context.
  CudaModule(int device, std::string_view image);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  // The kernel named `name` (its extern "C" name); throws naming it when absent.
  CudaKernel kernel(const std::string& name) const;
  int device() const { return device_; }

private:
  CUmodule module_ = nullptr;
  int device_;
};

} // namespace kiln::cuda
