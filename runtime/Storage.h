// Storage: a refcounted block of memory that tensors view; also carries the version counter
// shared by all views of it (bumped by in-place writes, checked later by autograd).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "runtime/Device.h"
#include "runtime/IntrusivePtr.h"

namespace kiln {

class StorageImpl : public RefCounted {
public:
  // Owns memory from the CPU or CUDA caching allocator (a CUDA device index -1 becomes the
  // current device).
  static IntrusivePtr<StorageImpl> allocate(size_t nbytes, Device device);
  // Wraps memory owned elsewhere (numpy, DLPack); `release` runs when the storage dies.
  static IntrusivePtr<StorageImpl> wrap(void* data, size_t nbytes, Device device,
                                        std::function<void()> release);
  ~StorageImpl() override;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bumpVersion() { version_.fetch_add(1, std::memory_order_relaxed); }

private:
  StorageImpl() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::function<void()> release_; // empty: memory is the allocator's
  std::atomic<uint32_t> version_{0};
};

using Storage = IntrusivePtr<StorageImpl>;

} // namespace kiln
