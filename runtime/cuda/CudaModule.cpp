// cuModuleLoadData / cuModuleGetFunction / cuLaunchKernel with errors that name the kernel.
#include "runtime/cuda/CudaModule.h"

#include "runtime/Error.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"

namespace kiln::cuda {

CudaModule::CudaModule(int device, std::string_view image) : device_(device) {
  const CudaDriver& driver = requireCudaDriver("loading a CUDA module");
  KILN_CHECK(!image.empty(), "cuModuleLoadData: the module image is empty");
  CudaDeviceGuard guard(device);
  // The driver reads PTX as a C string; a CUBIN carries its own size in its ELF header.
  std::string terminated(image);
  CUresult r = driver.api().cuModuleLoadData(&module_, terminated.c_str());
  if (r != kCudaSuccess)
    throw Error(strCat("cuModuleLoadData failed on cuda:", device, " (", image.size(),
                       "-byte image): ", driver.describe(r)));
}

CudaModule::~CudaModule() {
  if (!module_) return;
  try {
    CudaDeviceGuard guard(device_);
    CudaDriver::get().api().cuModuleUnload(module_);
  } catch (const Error&) {
    // Unloading at exit may find the context gone; nothing is left to release then.
  }
}

CudaKernel CudaModule::kernel(const std::string& name) const {
  CUfunction fn = nullptr;
  const CudaDriver& driver = CudaDriver::get();
  CUresult r = driver.api().cuModuleGetFunction(&fn, module_, name.c_str());
  if (r != kCudaSuccess)
    throw Error(strCat("cuModuleGetFunction: no kernel '", name, "' in the module: ",
                       driver.describe(r)));
  return CudaKernel(fn, device_, name);
}

void CudaKernel::setMaxDynamicSharedMemory(int bytes) const {
  const CudaDriver& driver = CudaDriver::get();
  CUresult r = driver.api().cuFuncSetAttribute(function_, kFuncAttrMaxDynamicSharedBytes, bytes);
  if (r != kCudaSuccess)
    throw Error(strCat("cuFuncSetAttribute(max dynamic shared memory = ", bytes, ") for kernel '",
                       name_, "' failed: ", driver.describe(r)));
}

void CudaKernel::launch(const LaunchConfig& c, void** args) const {
  KILN_CHECK(c.stream.device == device_, "kernel '", name_, "' of cuda:", device_,
             " launched on a stream of cuda:", c.stream.device);
  const CudaDriver& driver = CudaDriver::get();
  CudaDeviceGuard guard(device_);
  CUresult r = driver.api().cuLaunchKernel(function_, c.grid.x, c.grid.y, c.grid.z, c.block.x,
                                           c.block.y, c.block.z, c.sharedMemBytes, c.stream.handle,
                                           args, nullptr);
  if (r != kCudaSuccess)
    throw Error(strCat("cuLaunchKernel of '", name_, "' (grid ", c.grid.x, "x", c.grid.y, "x",
                       c.grid.z, ", block ", c.block.x, "x", c.block.y, "x", c.block.z, ", ",
                       c.sharedMemBytes, " bytes of shared memory) failed: ", driver.describe(r)));
}

} // namespace kiln::cuda
