// Device memory for tensor storages (one caching allocator per device, fed by cuMemAlloc) and
// the byte copies between host and device that the CUDA tensor kernels are made of.
#pragma once
#include <cstddef>
#include <cstdint>

#include "runtime/cuda/CudaCachingAllocator.h"
#include "runtime/cuda/CudaStream.h"

namespace kiln::cuda {

// The caching allocator of device `index` (created on first use).
CudaCachingAllocator& deviceAllocator(int index);
// True once device `index`'s allocator exists (memory_stats of an unused device is empty).
bool deviceAllocatorExists(int index);

// `bytes` of device memory for use on the device's current stream.
void* allocateDeviceMemory(int device, size_t bytes);
void freeDeviceMemory(int device, void* ptr);

// Byte copies queued on `stream`. Copies touching host memory wait for the stream before they
// return (the host buffer is pageable and may be reused or read right after).
void copyHostToDevice(void* dst, const void* src, size_t bytes, CudaStream stream);
void copyDeviceToHost(void* dst, const void* src, size_t bytes, CudaStream stream);
void copyDeviceToDevice(void* dst, const void* src, size_t bytes, CudaStream stream);
// Fills `count` elements of `elementSize` bytes (1, 2 or 4) at dst with the bit pattern `value`.
void fillDevice(void* dst, uint32_t value, size_t elementSize, size_t count, CudaStream stream);

} // namespace kiln::cuda
