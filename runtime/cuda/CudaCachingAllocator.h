// The CUDA caching allocator (PyTorch's c10/cuda/CUDACachingAllocator design, our code): device
// memory is taken from the driver in segments and handed out as blocks. Requests round up to
// 512 bytes; those <= 1 MiB come from 2 MiB segments of the small pool, larger ones from the
// large pool (20 MiB segments below 10 MiB, else the size rounded to 2 MiB). A block larger than
// the request is split; a freed block merges with its free neighbours and waits in the pool of
// the stream it was allocated on: only that stream reuses it, so no event is needed (memory used
// on a second stream must be kept alive by the caller: record_stream is not implemented). When
// the driver is out of memory, the cached free segments are released and the request retried.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace kiln::cuda {

// Where segments come from: the driver in production (cuMemAlloc/cuMemFree on one device), a
// fake in the unit tests. allocate returns 0 when the device is out of memory.
class SegmentSource {
public:
  virtual ~SegmentSource() = default;
  virtual uintptr_t allocate(size_t bytes) = 0;
  virtual void free(uintptr_t ptr) = 0;
};

// One statistic as PyTorch reports it: current, peak, and the running sums of increases
// (allocated) and decreases (freed).
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n);
  void decrease(int64_t n);
  void resetPeak() { peak = current; }
};

enum StatPool { kAllPools = 0, kSmallPool = 1, kLargePool = 2, kNumStatPools = 3 };

struct AllocatorStats {
  Stat allocation[kNumStatPools];      // blocks handed out
  Stat segment[kNumStatPools];         // segments held from the driver
  Stat active[kNumStatPools];          // blocks in use (allocated; equal without record_stream)
  Stat inactiveSplit[kNumStatPools];   // free blocks that are part of a split segment
  Stat allocatedBytes[kNumStatPools];
  Stat reservedBytes[kNumStatPools];
  Stat activeBytes[kNumStatPools];
  Stat inactiveSplitBytes[kNumStatPools];
  int64_t numAllocRetries = 0; // allocations that had to free the cache and retry
  int64_t numOoms = 0;         // allocations that failed even after that
  // PyTorch's flat names: "allocated_bytes.all.current", "num_ooms", ...
  std::map<std::string, int64_t> flatten() const;
};

class CudaCachingAllocator {
public:
  static constexpr size_t kMinBlockSize = 512;
  static constexpr size_t kSmallSize = size_t(1) << 20;       // largest small-pool request
  static constexpr size_t kSmallBuffer = size_t(2) << 20;     // small-pool segment size
  static constexpr size_t kLargeBuffer = size_t(20) << 20;    // segment for 1..10 MiB requests
  static constexpr size_t kMinLargeAlloc = size_t(10) << 20;  // larger: own rounded segment
  static constexpr size_t kRoundLarge = size_t(2) << 20;

  // `deviceName` names the device in out-of-memory errors ("cuda:0").
  CudaCachingAllocator(std::unique_ptr<SegmentSource> source, std::string deviceName);
  ~CudaCachingAllocator();

  // A block of at least `bytes` for use on `stream` (an opaque CUstream value); 0 bytes -> 0.
  // Throws kiln::Error "CUDA out of memory. Tried to allocate ..." when the device is full.
  uintptr_t allocate(size_t bytes, uintptr_t stream);
  // Returns a block from allocate() to its stream's pool.
  void free(uintptr_t ptr);
  // Releases every cached segment that has no block in use.
  void emptyCache();
  AllocatorStats stats() const;
  void resetPeakStats();
  void resetAccumulatedStats();

  static size_t roundSize(size_t bytes);
  static size_t segmentSize(size_t roundedBytes);

private:
  struct Block;
  struct BlockPool;
  Block* findFreeBlock(BlockPool& pool, size_t size, uintptr_t stream);
  Block* newSegment(BlockPool& pool, size_t size, uintptr_t stream);
  Block* splitBlock(Block* block, size_t size);
  void releaseCachedSegments();
  void updateStats(const Block* block, bool add);

  mutable std::mutex mutex_;
  std::unique_ptr<SegmentSource> source_;
  std::string deviceName_;
  std::unique_ptr<BlockPool> small_, large_;
  std::map<uintptr_t, Block*> allocated_;
  AllocatorStats stats_;
};

} // namespace kiln::cuda
