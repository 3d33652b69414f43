// Block pools ordered by (stream, size, address) so that the best fit on a stream is one
// lower_bound; segments are doubly linked lists of blocks so that a free block finds its
// neighbours to merge with.
#include "runtime/cuda/CudaCachingAllocator.h"

#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

#include "runtime/Error.h"

namespace kiln::cuda {

void Stat::increase(int64_t n) {
  current += n;
  allocated += n;
  if (current > peak) peak = current;
}

void Stat::decrease(int64_t n) {
  current -= n;
  freed += n;
}

struct CudaCachingAllocator::Block {
  uintptr_t ptr = 0;
  size_t size = 0;
  uintptr_t stream = 0;
  BlockPool* pool = nullptr;
  bool allocated = false;
  Block* prev = nullptr; // neighbours within the segment
  Block* next = nullptr;
  bool isSplit() const { return prev || next; }
};

namespace {

struct BlockOrder {
  template <typename B> bool operator()(const B* a, const B* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};

std::string formatBytes(size_t bytes) {
  char buf[64];
  if (bytes < (size_t(1) << 20)) std::snprintf(buf, sizeof(buf), "%.2f KiB", double(bytes) / 1024);
  else if (bytes < (size_t(1) << 30))
    std::snprintf(buf, sizeof(buf), "%.2f MiB", double(bytes) / double(1 << 20));
  else std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / double(1 << 30));
  return buf;
}

} // namespace

struct CudaCachingAllocator::BlockPool {
  explicit BlockPool(bool small) : isSmall(small) {}
  bool isSmall;
  std::set<Block*, BlockOrder> freeBlocks;
  StatPool statPool() const { return isSmall ? kSmallPool : kLargePool; }
};

size_t CudaCachingAllocator::roundSize(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t CudaCachingAllocator::segmentSize(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CudaCachingAllocator::CudaCachingAllocator(std::unique_ptr<SegmentSource> source,
                                           std::string deviceName)
    : source_(std::move(source)), deviceName_(std::move(deviceName)),
      small_(std::make_unique<BlockPool>(true)), large_(std::make_unique<BlockPool>(false)) {}

CudaCachingAllocator::~CudaCachingAllocator() {
  std::vector<Block*> all;
  for (auto& [ptr, b] : allocated_) all.push_back(b);
  for (BlockPool* p : {small_.get(), large_.get()})
    all.insert(all.end(), p->freeBlocks.begin(), p->freeBlocks.end());
  for (Block* b : all) {
    if (!b->prev) source_->free(b->ptr); // a segment's first block holds its base address
    delete b;
  }
}

uintptr_t CudaCachingAllocator::allocate(size_t bytes, uintptr_t stream) {
  if (bytes == 0) return 0;
  size_t size = roundSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  BlockPool& pool = size <= kSmallSize ? *small_ : *large_;
  Block* block = findFreeBlock(pool, size, stream);
  if (!block) block = newSegment(pool, size, stream);
  if (!block) {
    // Out of device memory: give the cached segments back to the driver and try once more.
    stats_.numAllocRetries++;
    releaseCachedSegments();
    block = newSegment(pool, size, stream);
  }
  if (!block) {
    stats_.numOoms++;
    throw Error(strCat("CUDA out of memory. Tried to allocate ", formatBytes(size), " on ",
                       deviceName_, ". Of the device memory, ",
                       formatBytes(size_t(stats_.allocatedBytes[kAllPools].current)),
                       " is allocated by kiln's tensors and ",
                       formatBytes(size_t(stats_.reservedBytes[kAllPools].current)),
                       " is reserved by kiln's caching allocator (kiln.cuda.memory_stats())"));
  }
  size_t remaining = block->size - size;
  bool split = pool.isSmall ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) splitBlock(block, size);
  block->allocated = true;
  allocated_[block->ptr] = block;
  updateStats(block, true);
  return block->ptr;
}

CudaCachingAllocator::Block* CudaCachingAllocator::findFreeBlock(BlockPool& pool, size_t size,
                                                                 uintptr_t stream) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.freeBlocks.lower_bound(&key);
  if (it == pool.freeBlocks.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.freeBlocks.erase(it);
  if (block->isSplit()) {
    StatPool sp = pool.statPool();
    for (StatPool s : {kAllPools, sp}) {
      stats_.inactiveSplit[s].decrease(1);
      stats_.inactiveSplitBytes[s].decrease(int64_t(block->size));
    }
  }
  return block;
}

CudaCachingAllocator::Block* CudaCachingAllocator::newSegment(BlockPool& pool, size_t size,
                                                              uintptr_t stream) {
  size_t bytes = segmentSize(size);
  uintptr_t ptr = source_->allocate(bytes);
  if (!ptr) return nullptr;
  auto* block = new Block();
  block->ptr = ptr;
  block->size = bytes;
  block->stream = stream;
  block->pool = &pool;
  for (StatPool s : {kAllPools, pool.statPool()}) {
    stats_.segment[s].increase(1);
    stats_.reservedBytes[s].increase(int64_t(bytes));
  }
  return block;
}

// Cuts `size` bytes off the front of `block`; the rest becomes a free block of the same pool.
CudaCachingAllocator::Block* CudaCachingAllocator::splitBlock(Block* block, size_t size) {
  auto* rest = new Block();
  rest->ptr = block->ptr + size;
  rest->size = block->size - size;
  rest->stream = block->stream;
  rest->pool = block->pool;
  rest->prev = block;
  rest->next = block->next;
  if (block->next) block->next->prev = rest;
  block->next = rest;
  block->size = size;
  block->pool->freeBlocks.insert(rest);
  for (StatPool s : {kAllPools, block->pool->statPool()}) {
    stats_.inactiveSplit[s].increase(1);
    stats_.inactiveSplitBytes[s].increase(int64_t(rest->size));
  }
  return rest;
}

void CudaCachingAllocator::free(uintptr_t ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  KILN_CHECK(it != allocated_.end(), "CUDA caching allocator: free of an unknown pointer 0x",
             std::hex, ptr);
  Block* block = it->second;
  allocated_.erase(it);
  updateStats(block, false);
  block->allocated = false;
  BlockPool& pool = *block->pool;
  StatPool sp = pool.statPool();
  // Merge with free neighbours (same segment, hence same pool and stream).
  for (Block* neighbour : {block->prev, block->next}) {
    if (!neighbour || neighbour->allocated) continue;
    pool.freeBlocks.erase(neighbour);
    for (StatPool s : {kAllPools, sp}) {
      stats_.inactiveSplit[s].decrease(1);
      stats_.inactiveSplitBytes[s].decrease(int64_t(neighbour->size));
    }
    if (neighbour == block->prev) {
      block->ptr = neighbour->ptr;
      block->prev = neighbour->prev;
      if (block->prev) block->prev->next = block;
    } else {
      block->next = neighbour->next;
      if (block->next) block->next->prev = block;
    }
    block->size += neighbour->size;
    delete neighbour;
  }
  if (block->isSplit()) {
    for (StatPool s : {kAllPools, sp}) {
      stats_.inactiveSplit[s].increase(1);
      stats_.inactiveSplitBytes[s].increase(int64_t(block->size));
    }
  }
  pool.freeBlocks.insert(block);
}

void CudaCachingAllocator::releaseCachedSegments() {
  for (BlockPool* pool : {small_.get(), large_.get()}) {
    for (auto it = pool->freeBlocks.begin(); it != pool->freeBlocks.end();) {
      Block* b = *it;
      if (b->isSplit()) {
        ++it;
        continue;
      }
      source_->free(b->ptr);
      for (StatPool s : {kAllPools, pool->statPool()}) {
        stats_.segment[s].decrease(1);
        stats_.reservedBytes[s].decrease(int64_t(b->size));
      }
      it = pool->freeBlocks.erase(it);
      delete b;
    }
  }
}

void CudaCachingAllocator::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  releaseCachedSegments();
}

void CudaCachingAllocator::updateStats(const Block* block, bool add) {
  for (StatPool s : {kAllPools, block->pool->statPool()}) {
    for (Stat* count : {&stats_.allocation[s], &stats_.active[s]})
      add ? count->increase(1) : count->decrease(1);
    for (Stat* bytes : {&stats_.allocatedBytes[s], &stats_.activeBytes[s]})
      add ? bytes->increase(int64_t(block->size)) : bytes->decrease(int64_t(block->size));
  }
}

AllocatorStats CudaCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CudaCachingAllocator::resetPeakStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int s = 0; s < kNumStatPools; ++s)
    for (Stat* st : {&stats_.allocation[s], &stats_.segment[s], &stats_.active[s],
                     &stats_.inactiveSplit[s], &stats_.allocatedBytes[s], &stats_.reservedBytes[s],
                     &stats_.activeBytes[s], &stats_.inactiveSplitBytes[s]})
      st->resetPeak();
}

void CudaCachingAllocator::resetAccumulatedStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int s = 0; s < kNumStatPools; ++s)
    for (Stat* st : {&stats_.allocation[s], &stats_.segment[s], &stats_.active[s],
                     &stats_.inactiveSplit[s], &stats_.allocatedBytes[s], &stats_.reservedBytes[s],
                     &stats_.activeBytes[s], &stats_.inactiveSplitBytes[s]})
      st->allocated = st->freed = 0;
  stats_.numAllocRetries = stats_.numOoms = 0;
}

std::map<std::string, int64_t> AllocatorStats::flatten() const {
  std::map<std::string, int64_t> out;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto add = [&](const char* name, const Stat* stat) {
    for (int s = 0; s < kNumStatPools; ++s) {
      std::string prefix = strCat(name, ".", pools[s], ".");
      out[prefix + "current"] = stat[s].current;
      out[prefix + "peak"] = stat[s].peak;
      out[prefix + "allocated"] = stat[s].allocated;
      out[prefix + "freed"] = stat[s].freed;
    }
  };
  add("allocation", allocation);
  add("segment", segment);
  add("active", active);
  add("inactive_split", inactiveSplit);
  add("allocated_bytes", allocatedBytes);
  add("reserved_bytes", reservedBytes);
  add("active_bytes", activeBytes);
  add("inactive_split_bytes", inactiveSplitBytes);
  out["num_alloc_retries"] = numAllocRetries;
  out["num_ooms"] = numOoms;
  return out;
}

} // namespace kiln::cuda
