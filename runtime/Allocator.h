// The CPU caching allocator: 64-byte aligned blocks, binned by size, reused after free.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln {

struct MemoryStats {
  int64_t allocatedBytes = 0;     // handed out to live tensors
  int64_t reservedBytes = 0;      // held from the OS (allocated + cached)
  int64_t peakAllocatedBytes = 0; // high-water mark of allocatedBytes
  int64_t allocations = 0;        // number of allocate() calls
  int64_t cacheHits = 0;          // allocate() calls served from the cache
};

class CpuAllocator {
public:
  static constexpr size_t kAlignment = 64;
  static CpuAllocator& instance();

  void* allocate(size_t nbytes);
  void free(void* ptr, size_t nbytes);
  MemoryStats stats() const;
  void resetPeak();
  // Returns every cached, unused block to the OS.
  void emptyCache();
};

} // namespace kiln
