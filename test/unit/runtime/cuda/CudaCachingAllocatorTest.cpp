// The CUDA caching allocator on a fake segment source (no GPU): rounding, pools, splitting,
// coalescing, per-stream reuse, the out-of-memory retry, and the stats PyTorch reports.
#include <cstdint>
#include <gtest/gtest.h>

#include <map>

#include "runtime/Error.h"
#include "runtime/cuda/CudaCachingAllocator.h"

using namespace kiln;
using namespace kiln::cuda;

namespace {

constexpr size_t MiB = size_t(1) << 20;

// Hands out disjoint fake addresses up to `capacity` bytes; records what is live.
struct FakeSegments {
  size_t capacity = size_t(1) << 40;
  size_t inUse = 0;
  uintptr_t nextAddress = 0x10000000;
  std::map<uintptr_t, size_t> live;
  int allocations = 0, frees = 0;
};

class FakeSource : public SegmentSource {
public:
  explicit FakeSource(FakeSegments& s) : s_(s) {}
  uintptr_t allocate(size_t bytes) override {
    if (s_.inUse + bytes > s_.capacity) return 0;
    uintptr_t p = s_.nextAddress;
    s_.nextAddress += bytes + 4096;
    s_.live[p] = bytes;
    s_.inUse += bytes;
    s_.allocations++;
    return p;
  }
  void free(uintptr_t p) override {
    auto it = s_.live.find(p);
    ASSERT_NE(it, s_.live.end()) << "free of a pointer that is not a segment";
    s_.inUse -= it->second;
    s_.live.erase(it);
    s_.frees++;
  }

private:
  FakeSegments& s_;
};

struct AllocatorTest : ::testing::Test {
  FakeSegments segments;
  CudaCachingAllocator alloc{std::make_unique<FakeSource>(segments), "cuda:0"};
  std::map<std::string, int64_t> stats() { return alloc.stats().flatten(); }
};

constexpr uintptr_t kStreamA = 0, kStreamB = 0x5000;

} // namespace

TEST(CudaCachingAllocatorSizes, RoundsTo512AndPicksSegments) {
  EXPECT_EQ(CudaCachingAllocator::roundSize(1), 512u);
  EXPECT_EQ(CudaCachingAllocator::roundSize(512), 512u);
  EXPECT_EQ(CudaCachingAllocator::roundSize(513), 1024u);
  EXPECT_EQ(CudaCachingAllocator::segmentSize(512), 2 * MiB);
  EXPECT_EQ(CudaCachingAllocator::segmentSize(MiB), 2 * MiB);
  EXPECT_EQ(CudaCachingAllocator::segmentSize(MiB + 512), 20 * MiB);
  EXPECT_EQ(CudaCachingAllocator::segmentSize(10 * MiB), 10 * MiB);
  EXPECT_EQ(CudaCachingAllocator::segmentSize(11 * MiB), 12 * MiB);
}

TEST_F(AllocatorTest, SmallRequestsSplitOneSegment) {
  uintptr_t a = alloc.allocate(100, kStreamA);
  uintptr_t b = alloc.allocate(1000, kStreamA);
  EXPECT_EQ(segments.allocations, 1);
  EXPECT_EQ(b, a + 512); // the rest of the first split, best fit at the lowest address
  auto s = stats();
  EXPECT_EQ(s["allocated_bytes.all.current"], 512 + 1024);
  EXPECT_EQ(s["allocated_bytes.small_pool.current"], 512 + 1024);
  EXPECT_EQ(s["reserved_bytes.all.current"], int64_t(2 * MiB));
  EXPECT_EQ(s["segment.small_pool.current"], 1);
  EXPECT_EQ(s["allocation.all.current"], 2);
  EXPECT_EQ(s["inactive_split_bytes.all.current"], int64_t(2 * MiB - 1536));
}

TEST_F(AllocatorTest, FreedNeighboursCoalesce) {
  uintptr_t a = alloc.allocate(512, kStreamA);
  uintptr_t b = alloc.allocate(512, kStreamA);
  uintptr_t c = alloc.allocate(512, kStreamA);
  alloc.free(a);
  alloc.free(c); // c merges with the free tail of the segment
  EXPECT_EQ(stats()["inactive_split.all.current"], 2);
  alloc.free(b); // b merges with both: the segment is whole again
  auto s = stats();
  EXPECT_EQ(s["inactive_split.all.current"], 0);
  EXPECT_EQ(s["allocated_bytes.all.current"], 0);
  // The whole segment serves the largest small request from its start again.
  EXPECT_EQ(alloc.allocate(MiB, kStreamA), a);
  EXPECT_EQ(segments.allocations, 1);
}

TEST_F(AllocatorTest, LargeRequestsUseTheLargePool) {
  uintptr_t a = alloc.allocate(3 * MiB, kStreamA);
  auto s = stats();
  EXPECT_EQ(s["reserved_bytes.large_pool.current"], int64_t(20 * MiB));
  EXPECT_EQ(s["allocated_bytes.large_pool.current"], int64_t(3 * MiB));
  uintptr_t b = alloc.allocate(5 * MiB, kStreamA); // split from the same 20 MiB segment
  EXPECT_EQ(b, a + 3 * MiB);
  EXPECT_EQ(segments.allocations, 1);
  uintptr_t c = alloc.allocate(11 * MiB, kStreamA); // fits the 12 MiB left of that segment
  EXPECT_EQ(c, b + 5 * MiB);
  EXPECT_EQ(segments.allocations, 1);
  alloc.free(c);
  uintptr_t d = alloc.allocate(13 * MiB, kStreamA); // over 10 MiB: its own segment (14 MiB)
  EXPECT_EQ(segments.allocations, 2);
  EXPECT_EQ(segments.live[d], 14 * MiB);
  // A 1 MiB remainder of the 14 MiB segment is not split off (large pool keeps > 1 MiB only).
  EXPECT_EQ(stats()["allocated_bytes.large_pool.current"], int64_t(3 * MiB + 5 * MiB + 14 * MiB));
}

TEST_F(AllocatorTest, BlocksAreReusedOnlyOnTheirStream) {
  uintptr_t a = alloc.allocate(4096, kStreamA);
  alloc.free(a);
  uintptr_t b = alloc.allocate(4096, kStreamB);
  EXPECT_NE(b, a);
  EXPECT_EQ(segments.allocations, 2); // stream B got a segment of its own
  uintptr_t c = alloc.allocate(4096, kStreamA);
  EXPECT_EQ(c, a); // stream A's cached block
  EXPECT_EQ(segments.allocations, 2);
}

TEST_F(AllocatorTest, OutOfMemoryReleasesTheCacheAndRetries) {
  segments.capacity = 24 * MiB;
  uintptr_t a = alloc.allocate(4 * MiB, kStreamA); // 20 MiB segment
  alloc.free(a);                                   // cached, not returned
  EXPECT_EQ(segments.inUse, 20 * MiB);
  // Stream B cannot use stream A's cached block and needs 12 MiB more: retry after release.
  uintptr_t b = alloc.allocate(12 * MiB, kStreamB);
  EXPECT_NE(b, 0u);
  auto s = stats();
  EXPECT_EQ(s["num_alloc_retries"], 1);
  EXPECT_EQ(s["num_ooms"], 0);
  EXPECT_EQ(segments.frees, 1);
  EXPECT_EQ(s["reserved_bytes.all.current"], int64_t(12 * MiB));
}

TEST_F(AllocatorTest, OutOfMemoryAfterRetryThrowsAndCounts) {
  segments.capacity = 16 * MiB;
  uintptr_t a = alloc.allocate(12 * MiB, kStreamA);
  try {
    alloc.allocate(12 * MiB, kStreamA);
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA out of memory. Tried to allocate 12.00 MiB on cuda:0"),
              std::string::npos)
        << msg;
  }
  auto s = stats();
  EXPECT_EQ(s["num_ooms"], 1);
  EXPECT_EQ(s["num_alloc_retries"], 1);
  alloc.free(a);
}

TEST_F(AllocatorTest, EmptyCacheKeepsSegmentsInUse) {
  uintptr_t a = alloc.allocate(512, kStreamA);
  uintptr_t b = alloc.allocate(4 * MiB, kStreamA);
  alloc.free(b);
  alloc.emptyCache();
  auto s = stats();
  EXPECT_EQ(s["reserved_bytes.all.current"], int64_t(2 * MiB)); // a's segment stays
  EXPECT_EQ(s["segment.all.current"], 1);
  EXPECT_EQ(s["segment.all.freed"], 1);
  alloc.free(a);
  alloc.emptyCache();
  EXPECT_EQ(stats()["reserved_bytes.all.current"], 0);
  EXPECT_TRUE(segments.live.empty());
}

TEST_F(AllocatorTest, PeakAndReset) {
  uintptr_t a = alloc.allocate(3000, kStreamA);
  uintptr_t b = alloc.allocate(5000, kStreamA);
  alloc.free(a);
  alloc.free(b);
  auto s = stats();
  EXPECT_EQ(s["allocated_bytes.all.peak"], 3072 + 5120);
  EXPECT_EQ(s["allocated_bytes.all.allocated"], 3072 + 5120);
  EXPECT_EQ(s["allocated_bytes.all.freed"], 3072 + 5120);
  alloc.resetPeakStats();
  EXPECT_EQ(stats()["allocated_bytes.all.peak"], 0);
  alloc.resetAccumulatedStats();
  EXPECT_EQ(stats()["allocated_bytes.all.allocated"], 0);
  EXPECT_EQ(stats()["reserved_bytes.all.current"], int64_t(2 * MiB));
}

TEST_F(AllocatorTest, FreeOfAnUnknownPointerIsAnError) {
  EXPECT_THROW(alloc.free(0x1234), Error);
  EXPECT_EQ(alloc.allocate(0, kStreamA), 0u);
  alloc.free(0); // freeing a null pointer (an empty storage) is a no-op
}
