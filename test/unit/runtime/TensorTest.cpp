// Tensor geometry, the allocator and the dispatcher through the typed op API.
#include <cstdint>
#include <gtest/gtest.h>

#include "generated/Ops.h"
#include "runtime/Allocator.h"
#include "runtime/TensorIterator.h"

using namespace kiln;

TEST(Tensor, EmptyIsContiguous) {
  Tensor t = Tensor::empty({2, 3, 4}, ScalarType::Float32);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_TRUE(t.isContiguous());
  EXPECT_EQ(t.strides()[0], 12);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.rawData()) % CpuAllocator::kAlignment, 0u);
}

TEST(Tensor, AddBroadcastsAndPromotes) {
  Tensor a = ops::full({2, 3}, Scalar(int64_t(2)), ScalarType::Int32);
  Tensor b = ops::full({3}, Scalar(0.5), ScalarType::Float32);
  Tensor c = ops::add(a, b);
  EXPECT_EQ(c.dtype(), ScalarType::Float32);
  ASSERT_EQ(c.dim(), 2);
  EXPECT_FLOAT_EQ(c.data<float>()[5], 2.5f);
}

TEST(Tensor, WrappedNumberDoesNotPromoteCategory) {
  Tensor a = ops::ones({4}, ScalarType::UInt8);
  Tensor c = ops::add(a, Tensor::wrapScalar(Scalar(int64_t(1000))));
  EXPECT_EQ(c.dtype(), ScalarType::UInt8);
  Tensor d = ops::mul(a, Tensor::wrapScalar(Scalar(2.5)));
  EXPECT_EQ(d.dtype(), ScalarType::Float32);
}

TEST(Tensor, MetaTensorsHaveShapesOnly) {
  Tensor a = ops::empty({5, 1}, ScalarType::Float16, Device(DeviceType::Meta));
  Tensor b = ops::empty({1, 7}, ScalarType::Float32, Device(DeviceType::Meta));
  Tensor c = ops::mul(a, b);
  EXPECT_TRUE(c.isMeta());
  EXPECT_EQ(c.dtype(), ScalarType::Float32);
  EXPECT_EQ(c.size(0), 5);
  EXPECT_EQ(c.size(1), 7);
}

TEST(Tensor, BroadcastMismatchNamesOpAndShapes) {
  Tensor a = ops::ones({2, 3});
  Tensor b = ops::ones({4});
  try {
    ops::add(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("add"), std::string::npos);
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos);
  }
}

// std::aligned_alloc needs a size that is a multiple of the alignment (C11); bins between 64
// and 256 bytes once stepped by a quarter power of two (80, 96, 160 bytes), which ASan rejects.
TEST(Allocator, BlockSizesAreMultiplesOfTheAlignment) {
  for (size_t n : {1, 63, 65, 70, 100, 129, 160, 200, 255, 257, 1000, 4097}) {
    auto before = CpuAllocator::instance().stats();
    void* p = CpuAllocator::instance().allocate(n);
    auto after = CpuAllocator::instance().stats();
    int64_t size = after.allocatedBytes - before.allocatedBytes;
    EXPECT_GE(size, int64_t(n));
    EXPECT_EQ(size % int64_t(CpuAllocator::kAlignment), 0) << "request of " << n << " bytes";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % CpuAllocator::kAlignment, 0u);
    CpuAllocator::instance().free(p, n);
  }
}

TEST(Allocator, ReusesFreedBlocks) {
  auto before = CpuAllocator::instance().stats();
  { Tensor t = Tensor::empty({1000}, ScalarType::Float32); }
  { Tensor t = Tensor::empty({1000}, ScalarType::Float32); }
  auto after = CpuAllocator::instance().stats();
  EXPECT_GE(after.cacheHits, before.cacheHits + 1);
  EXPECT_EQ(after.allocatedBytes, before.allocatedBytes);
}
