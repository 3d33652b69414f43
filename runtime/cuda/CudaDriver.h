// The CUDA driver (libcuda.so.1), loaded with dlopen on first use so that kiln builds and runs
// on machines without an NVIDIA driver. Without one, every CUDA request raises a RuntimeError
// that says why (requireCudaDriver); kiln.cuda.is_available() is false.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "runtime/cuda/CudaDriverApi.h"

namespace kiln::cuda {

class CudaDriver {
public:
  // The process's driver, loaded and cuInit'ed once (thread-safe); never throws. The library is
  // $KILN_CUDA_DRIVER when set (tests point it at a fake driver), else libcuda.so.1.
  static const CudaDriver& get();
  // A driver loaded from `library` on its own (tests load fakes and missing libraries with it).
  static std::unique_ptr<CudaDriver> open(const std::string& library);

  bool available() const { return available_; }
  // Why the driver is not available ("libcuda.so.1 could not be loaded: ..."); empty if it is.
  const std::string& unavailableReason() const { return reason_; }
  // The entry points; only valid when available().
  const CudaDriverTable& api() const { return api_; }
  int deviceCount() const { return deviceCount_; }
  int driverVersion() const { return driverVersion_; } // e.g. 13000 for CUDA 13.0

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a result code.
  std::string describe(CUresult result) const;
  // Throws kiln::Error "<call> failed: <describe(result)>" unless result is CUDA_SUCCESS.
  void check(CUresult result, const char* call) const;

private:
  CudaDriver() = default;
  bool load(const std::string& library);
  bool available_ = false;
  std::string reason_;
  CudaDriverTable api_{};
  int deviceCount_ = 0;
  int driverVersion_ = 0;
};

// The driver, or a RuntimeError "<what>: CUDA is not available: <reason> (...)".
const CudaDriver& requireCudaDriver(std::string_view what);

} // namespace kiln::cuda

// Calls a driver entry point by name and throws a kiln::Error naming it on failure:
// KILN_CUDA_CHECK(cuStreamSynchronize, stream).
#define KILN_CUDA_CHECK(entry, ...)                                                                \
  do {                                                                                             \
    const ::kiln::cuda::CudaDriver& kilnDriver_ = ::kiln::cuda::CudaDriver::get();                 \
    kilnDriver_.check(kilnDriver_.api().entry(__VA_ARGS__), #entry);                               \
  } while (0)
