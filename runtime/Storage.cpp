// Storage allocation and release.
#include "runtime/Storage.h"

#include "runtime/Allocator.h"
#include "runtime/Error.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaMemory.h"
#include <cstdint>

namespace kiln {

IntrusivePtr<StorageImpl> StorageImpl::allocate(size_t nbytes, Device device) {
  IntrusivePtr<StorageImpl> s(new StorageImpl());
  s->nbytes_ = nbytes;
  s->device_ = device;
  if (device.isCpu()) {
    s->data_ = nbytes ? CpuAllocator::instance().allocate(nbytes) : nullptr;
  } else if (device.isCuda()) {
    int index = cuda::resolveDeviceIndex(device, "allocating CUDA memory");
    s->device_ = Device(DeviceType::CUDA, int8_t(index));
    s->data_ = nbytes ? cuda::allocateDeviceMemory(index, nbytes) : nullptr;
  } else if (!device.isMeta()) {
    throw Error("kiln was asked for memory on " + device.str() +
                ", but this build has no allocator for that device");
  }
  return s;
}

IntrusivePtr<StorageImpl> StorageImpl::wrap(void* data, size_t nbytes, Device device,
                                            std::function<void()> release) {
  IntrusivePtr<StorageImpl> s(new StorageImpl());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->release_ = std::move(release);
  return s;
}

StorageImpl::~StorageImpl() {
  if (release_) release_();
  else if (device_.isCpu() && data_) CpuAllocator::instance().free(data_, nbytes_);
  else if (device_.isCuda() && data_) cuda::freeDeviceMemory(device_.index, data_);
}

} // namespace kiln
