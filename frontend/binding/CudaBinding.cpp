// Thin wrappers: kiln.cuda turns these into PyTorch's names and argument conventions. Streams
// cross the boundary as (device, handle) pairs of ints; handle 0 is the default stream.
#include "frontend/binding/CudaBinding.h"

#include <cstdint>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "runtime/Error.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/CudaMemory.h"
#include "runtime/cuda/CudaStream.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

using cuda::CudaStream;

CudaStream streamOf(int device, uintptr_t handle) {
  return {device, reinterpret_cast<CUstream>(handle)};
}

uintptr_t handleOf(CudaStream s) { return reinterpret_cast<uintptr_t>(s.handle); }

int checkedDevice(int device, const char* what) {
  return cuda::resolveDeviceIndex(Device(DeviceType::CUDA, int8_t(device)), what);
}

} // namespace

void registerCuda(nb::module_& m) {
  m.def("_cuda_is_available", [] { return cuda::CudaDriver::get().available(); });
  m.def("_cuda_unavailable_reason", [] { return cuda::CudaDriver::get().unavailableReason(); });
  m.def("_cuda_device_count", [] {
    const cuda::CudaDriver& d = cuda::CudaDriver::get();
    return d.available() ? d.deviceCount() : 0;
  });
  m.def("_cuda_driver_version", [] {
    return cuda::requireCudaDriver("kiln.cuda.driver_version()").driverVersion();
  });
  m.def("_cuda_current_device", [] {
    cuda::requireCudaDriver("kiln.cuda.current_device()");
    return cuda::currentDevice();
  });
  m.def("_cuda_set_device", [](int index) { cuda::setCurrentDevice(index); });
  m.def("_cuda_device_properties", [](int index) {
    cuda::CudaDeviceProperties p = cuda::deviceProperties(index);
    return std::make_tuple(p.name, p.major, p.minor, p.multiProcessorCount, p.totalMemory);
  });
  m.def("_cuda_synchronize", [](int device) {
    cuda::synchronizeDevice(checkedDevice(device, "kiln.cuda.synchronize()"));
  });
  m.def("_cuda_current_stream", [](int device) {
    return handleOf(cuda::currentStream(checkedDevice(device, "kiln.cuda.current_stream()")));
  });
  m.def("_cuda_set_stream", [](int device, uintptr_t handle) {
    cuda::setCurrentStream(streamOf(checkedDevice(device, "kiln.cuda.set_stream()"), handle));
  });
  m.def("_cuda_stream_from_pool", [](int device) {
    return handleOf(cuda::streamFromPool(checkedDevice(device, "kiln.cuda.Stream()")));
  });
  m.def("_cuda_stream_synchronize", [](int device, uintptr_t handle) {
    cuda::synchronizeStream(streamOf(device, handle));
  });
  m.def("_cuda_stream_query",
        [](int device, uintptr_t handle) { return cuda::queryStream(streamOf(device, handle)); });

  nb::class_<cuda::CudaEvent>(m, "_CudaEvent")
      .def(nb::init<bool, bool>(), nb::arg("enable_timing") = false, nb::arg("blocking") = false)
      .def("record", [](cuda::CudaEvent& e, int device,
                        uintptr_t handle) { e.record(streamOf(device, handle)); })
      .def("block", [](cuda::CudaEvent& e, int device,
                       uintptr_t handle) { e.block(streamOf(device, handle)); })
      .def("synchronize", &cuda::CudaEvent::synchronize)
      .def("query", &cuda::CudaEvent::query)
      .def("elapsed_time", &cuda::CudaEvent::elapsedTime)
      .def_prop_ro("recorded", &cuda::CudaEvent::recorded);

  // Memory: an unused or absent device reports empty stats, as PyTorch's uninitialized CUDA.
  m.def("_cuda_memory_stats", [](int device) {
    if (!cuda::deviceAllocatorExists(device)) return std::map<std::string, int64_t>();
    return cuda::deviceAllocator(device).stats().flatten();
  });
  m.def("_cuda_reset_peak_memory_stats", [](int device) {
    if (cuda::deviceAllocatorExists(device)) cuda::deviceAllocator(device).resetPeakStats();
  });
  m.def("_cuda_reset_accumulated_memory_stats", [](int device) {
    if (cuda::deviceAllocatorExists(device)) cuda::deviceAllocator(device).resetAccumulatedStats();
  });
  m.def("_cuda_empty_cache", [] {
    const cuda::CudaDriver& d = cuda::CudaDriver::get();
    for (int i = 0; d.available() && i < d.deviceCount(); ++i)
      if (cuda::deviceAllocatorExists(i)) cuda::deviceAllocator(i).emptyCache();
  });
}

} // namespace kiln::python
