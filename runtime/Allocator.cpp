// Size-binned free lists under one mutex. Sizes round up to a bin (powers of two split in
// four, and always a multiple of the alignment: std::aligned_alloc requires the size to be one)
// so a freed block serves any later request of its bin.
#include "runtime/Allocator.h"

#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace kiln {
namespace {

size_t binSize(size_t n) {
  if (n <= 64) return 64;
  size_t p = size_t(1) << (63 - __builtin_clzll(n)); // largest power of two <= n
  if (n == p) return n;
  // A quarter below the alignment (n < 256) would give sizes aligned_alloc may reject (C11:
  // undefined; ASan aborts on it): such bins step by the alignment instead.
  size_t step = std::max(p / 4, CpuAllocator::kAlignment);
  return (n + step - 1) / step * step;
}

struct State {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> cache;
  MemoryStats stats;
};

State& state() {
  static State* s = new State(); // never destroyed: tensors may outlive static destructors
  return *s;
}

} // namespace

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator a;
  return a;
}

void* CpuAllocator::allocate(size_t nbytes) {
  size_t size = binSize(nbytes);
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stats.allocations++;
    auto it = s.cache.find(size);
    if (it != s.cache.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      s.stats.cacheHits++;
      s.stats.allocatedBytes += int64_t(size);
      if (s.stats.allocatedBytes > s.stats.peakAllocatedBytes)
        s.stats.peakAllocatedBytes = s.stats.allocatedBytes;
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlignment, size);
  if (!p) throw std::bad_alloc();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats.allocatedBytes += int64_t(size);
  s.stats.reservedBytes += int64_t(size);
  if (s.stats.allocatedBytes > s.stats.peakAllocatedBytes)
    s.stats.peakAllocatedBytes = s.stats.allocatedBytes;
  return p;
}

void CpuAllocator::free(void* ptr, size_t nbytes) {
  if (!ptr) return;
  size_t size = binSize(nbytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats.allocatedBytes -= int64_t(size);
  s.cache[size].push_back(ptr);
}

MemoryStats CpuAllocator::stats() const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.stats;
}

void CpuAllocator::resetPeak() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats.peakAllocatedBytes = s.stats.allocatedBytes;
}

void CpuAllocator::emptyCache() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& [size, blocks] : s.cache) {
    for (void* p : blocks) std::free(p);
    s.stats.reservedBytes -= int64_t(size * blocks.size());
    blocks.clear();
  }
}

} // namespace kiln
