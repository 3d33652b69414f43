// The reduction plan's geometry (dim order, coalescing, strategy) and reductions of inputs
// Python cannot easily build (zero strides).
#include <cstdint>
#include <gtest/gtest.h>

#include "generated/Ops.h"
#include "runtime/Reduction.h"

using namespace kiln;

namespace {

using V = std::vector<int64_t>;

Tensor iota(IntArrayRef sizes) {
  Tensor t = Tensor::empty(sizes, ScalarType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i);
  return t;
}

} // namespace

TEST(Reduction, DimMaskRules) {
  EXPECT_EQ(makeDimMask(std::nullopt, 3), DimMask(0b111));
  EXPECT_EQ(makeDimMask(IntArrayRef{}, 3), DimMask(0b111));
  EXPECT_EQ(makeDimMask(IntArrayRef{}, 3, false), DimMask(0));
  EXPECT_EQ(makeDimMask(IntArrayRef{-1, 0}, 3), DimMask(0b101));
  EXPECT_THROW(makeDimMask(IntArrayRef{1, -2}, 3), Error);
  EXPECT_THROW(makeDimMask(IntArrayRef{3}, 3), IndexError);
  EXPECT_EQ(reducedSizes({4, 5, 6}, 0b010, false).vec(), V({4, 6}));
  EXPECT_EQ(reducedSizes({4, 5, 6}, 0b010, true).vec(), V({4, 1, 6}));
}

TEST(Reduction, PlanOrdersKeptDimsByStrideAndPicksLanes) {
  Tensor x = iota({4, 5, 6});
  Tensor out = emptyReduction(x, 0b010, false, ScalarType::Float32);
  ReductionPlan p = planReduction(x, 0b010, {out});
  EXPECT_EQ(p.keptSizes.vec(), V({6, 4}));
  EXPECT_EQ(p.keptInputStrides.vec(), V({4, 120}));
  EXPECT_EQ(p.keptOutputStrides[0].vec(), V({4, 24}));
  EXPECT_EQ(p.reducedSizes.vec(), V({5}));
  EXPECT_FALSE(p.innerReduction); // the fastest input dim is kept: lanes over outputs
  EXPECT_EQ(p.numOutputs, 24);
  EXPECT_EQ(p.reduceSize, 5);
}

TEST(Reduction, PlanCoalescesWholeContiguousReduction) {
  Tensor x = iota({3, 1, 4, 5});
  Tensor out = emptyReduction(x, 0b1111, true, ScalarType::Float32);
  ReductionPlan p = planReduction(x, 0b1111, {out});
  EXPECT_TRUE(p.keptSizes.empty());
  EXPECT_EQ(p.reducedSizes.vec(), V({60}));
  EXPECT_TRUE(p.innerReduction);
}

TEST(Reduction, TransposedInputReducesInMemoryOrder) {
  Tensor x = iota({6, 4}).asStrided({4, 6}, {1, 4}, 0); // a transposed view
  Tensor out = emptyReduction(x, 0b01, false, ScalarType::Float32);
  ReductionPlan p = planReduction(x, 0b01, {out});
  EXPECT_TRUE(p.innerReduction);
  EXPECT_EQ(p.reducedStrides.vec(), V({4}));
  Tensor s = ops::sum(x, IntArrayRef{0});
  for (int64_t j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(s.data<float>()[j], float(4 * j * 4 + 6));
}

TEST(Reduction, ZeroStrideInputs) {
  // A [4] tensor broadcast to [4, 50000] without copying: every row repeats one value.
  Tensor base = iota({4});
  Tensor x = base.asStrided({4, 50000}, {1, 0}, 0);
  Tensor rows = ops::sum(x, IntArrayRef{1});
  for (int64_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(rows.data<float>()[i], 50000.0f * float(i));
  EXPECT_FLOAT_EQ(ops::sum(x).item().toDouble(), 6.0 * 50000);
  EXPECT_EQ(ops::argmax(x).item().toInt(), 3 * 50000); // first of the tied maxima
  auto [values, indices] = ops::maxDim(x, 1);
  EXPECT_FLOAT_EQ(values.data<float>()[2], 2.0f);
  EXPECT_EQ(indices.data<int64_t>()[2], 0);
  Tensor cols = ops::amin(x, IntArrayRef{0});
  EXPECT_FLOAT_EQ(cols.data<float>()[49999], 0.0f);
}
