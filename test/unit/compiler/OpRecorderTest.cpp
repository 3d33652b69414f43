// OpRecorder: ops dispatched inside a Scope become typed graph nodes, run on meta tensors.
#include <gtest/gtest.h>

#include "compiler/OpRecorder.h"
#include "generated/Ops.h"
#include "ir/Printer.h"

using namespace kiln;
using compiler::OpRecorder;

namespace {

struct Recording {
  Graph graph{"f"};
  OpRecorder recorder{graph};
  Tensor input(const std::string& name, IntArrayRef sizes) {
    Tensor fake = compiler::makeFake(Tensor::empty(sizes, ScalarType::Float32));
    recorder.bind(fake, graph.placeholder(name));
    return fake;
  }
};

} // namespace

TEST(OpRecorder, RecordsOpsWithTypesAndRunsOnMeta) {
  Recording r;
  Tensor x = r.input("x", {2, 3});
  Tensor y;
  {
    OpRecorder::Scope scope(r.recorder);
    y = ops::relu(ops::add(x, ops::mul(x, x)));
  }
  EXPECT_TRUE(y.isMeta());
  EXPECT_EQ(r.recorder.numRecorded(), 3);
  Node* n = r.recorder.nodeOf(y);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->target(), "aten.relu");
  EXPECT_EQ(n->meta.type->str(), "f32[2, 3]");
  // Default arguments (alpha=1) are left out, as a user would write the call.
  EXPECT_EQ(n->args()[0].toNode()->target(), "aten.add.Tensor");
  EXPECT_EQ(n->args()[0].toNode()->args().size(), 2u);
}

TEST(OpRecorder, CompositeOpsAreOneNodeAndOutsideScopeNothingIsRecorded) {
  Recording r;
  Tensor x = r.input("x", {4, 3});
  Tensor w = r.input("w", {5, 3});
  {
    OpRecorder::Scope scope(r.recorder);
    ops::linear(x, w, std::nullopt);
  }
  ops::relu(x); // no scope: runs on meta, unrecorded
  EXPECT_EQ(r.recorder.numRecorded(), 1);
  EXPECT_EQ(r.graph.last()->target(), "aten.linear");
}

TEST(OpRecorder, FactoriesKeepTheirDeviceAndRunOnMeta) {
  Recording r;
  Tensor z;
  {
    OpRecorder::Scope scope(r.recorder);
    z = ops::zeros({1000, 1000}, ScalarType::Float32, std::nullopt);
  }
  EXPECT_TRUE(z.isMeta());
  EXPECT_EQ(r.recorder.deviceOf(z), Device());
}

TEST(OpRecorder, MultipleReturnsGetItemNodesAndInplaceRebinds) {
  Recording r;
  Tensor x = r.input("x", {4, 3});
  {
    OpRecorder::Scope scope(r.recorder);
    auto [values, indices] = ops::maxDim(x, 1, false);
    EXPECT_EQ(r.recorder.nodeOf(indices)->target(), "operator.getitem");
    EXPECT_EQ(r.recorder.nodeOf(indices)->meta.type->str(), "i64[4]");
    ops::add_(x, ops::unsqueeze(values, 1), 1.0);
  }
  EXPECT_EQ(r.recorder.nodeOf(x)->target(), "aten.add_.Tensor");
}

TEST(OpRecorder, RealTensorsAreLiftedOrRejected) {
  Recording r;
  Tensor x = r.input("x", {3});
  Tensor weight = ops::ones({3});
  {
    OpRecorder::Scope scope(r.recorder);
    EXPECT_THROW(ops::mul(x, weight), Error);
    r.recorder.liftTensor = [&](const Tensor&) { return r.graph.getAttr("weight"); };
    Tensor y = ops::mul(x, weight);
    EXPECT_TRUE(y.isMeta());
  }
  EXPECT_EQ(r.graph.last()->target(), "aten.mul.Tensor");
  EXPECT_EQ(r.graph.last()->args()[1].toNode()->target(), "weight");
}
