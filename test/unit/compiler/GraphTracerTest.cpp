// GraphTracer: retrace replays a graph on fakes, typing every node, and decomposes ops outside
// the requested op set (non-core ops at the core ATen level) through their decompositions.
#include <cstdint>
#include <gtest/gtest.h>

#include "compiler/Decompositions.h"
#include "compiler/GraphTracer.h"
#include "ir/OpTarget.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "runtime/Dispatcher.h"

using namespace kiln;
using compiler::DecomposeTo;
using compiler::retrace;

namespace {

Graph parseOne(std::string_view text) {
  ParseResult r = parseGraphs(text);
  if (r.error) ADD_FAILURE() << r.error->message;
  return std::move(r.graphs.at(0));
}

std::vector<std::string> targets(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes())
    if (n->opcode() == Opcode::CallFunction) out.push_back(n->target());
  return out;
}

bool calls(const Graph& g, const std::string& target) {
  for (const std::string& t : targets(g))
    if (t == target) return true;
  return false;
}

} // namespace

TEST(GraphTracer, AtenLevelKeepsOpsAndTypesEveryNode) {
  Graph g = parseOne(R"(graph @f(%x: f32[4, 8], %w: f32[3, 8]) {
  %l = call_function aten.linear(%x, %w)
  %s = call_function aten.softmax.int(%l, -1)
  output (%s,)
})");
  Graph r = retrace(g, DecomposeTo::None);
  EXPECT_EQ(targets(r), (std::vector<std::string>{"aten.linear", "aten.softmax.int"}));
  for (Node* n : r.nodes())
    if (n->opcode() != Opcode::Output) {
      ASSERT_TRUE(n->meta.type) << n->name();
    }
  EXPECT_EQ(r.placeholders().size(), 2u);
  EXPECT_EQ(r.placeholders()[0]->name(), "x");
  EXPECT_EQ(r.outputNode()->args()[0].items()[0].toNode()->meta.type->str(), "f32[4, 3]");
}

TEST(GraphTracer, CoreAtenLevelDecomposesNonCoreOpsRecursively) {
  Graph g = parseOne(R"(graph @f(%x: f32[4, 8], %w: f32[3, 8], %b: f32[3]) {
  %l = call_function aten.linear(%x, %w, %b)
  %s = call_function aten.log_softmax.int(%l, 1)
  output (%s,)
})");
  Graph r = retrace(g, DecomposeTo::CoreAten);
  EXPECT_FALSE(calls(r, "aten.linear"));
  EXPECT_FALSE(calls(r, "aten.log_softmax.int"));
  EXPECT_TRUE(calls(r, "aten.addmm"));
  EXPECT_TRUE(calls(r, "aten.amax"));
  EXPECT_TRUE(calls(r, "aten.exp"));
  // linear's weight transpose (t, not core) decomposes to permute.
  EXPECT_FALSE(calls(r, "aten.t"));
  EXPECT_TRUE(calls(r, "aten.permute"));
  for (Node* n : r.nodes())
    if (n->isOp()) {
      uint32_t tags = opSchema(n->op()).tags;
      EXPECT_TRUE(tags & (kTagCore | kTagPrims)) << n->target() << " is not core";
    }
  EXPECT_EQ(r.outputNode()->args()[0].items()[0].toNode()->meta.type->str(), "f32[4, 3]");
}

TEST(GraphTracer, MultiOutputOpsGetitemAndGradModeNodes) {
  Graph g = parseOne(R"(graph @f(%x: f32[4, 8]) {
  %g = call_function kiln._C._set_grad_enabled(False)
  %vm = call_function aten.var_mean.correction(%x, [1])
  %v = call_function operator.getitem(%vm, 0)
  %m = call_function operator.getitem(%vm, 1)
  %mx = call_function aten.max.dim(%x, 0)
  %i = call_function operator.getitem(%mx, 1)
  output (%v, %m, %i)
})");
  Graph r = retrace(g, DecomposeTo::CoreAten);
  EXPECT_TRUE(calls(r, "kiln._C._set_grad_enabled"));
  EXPECT_FALSE(calls(r, "aten.var_mean.correction"));
  EXPECT_TRUE(calls(r, "aten.var.correction"));
  EXPECT_TRUE(calls(r, "aten.mean.dim"));
  EXPECT_TRUE(calls(r, "aten.max.dim")); // core: recorded, with getitem nodes
  const auto& outs = r.outputNode()->args()[0].items();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].toNode()->target(), "aten.var.correction");
  EXPECT_EQ(outs[1].toNode()->target(), "aten.mean.dim");
  EXPECT_EQ(outs[2].toNode()->target(), "operator.getitem");
  EXPECT_EQ(outs[2].toNode()->meta.type->str(), "i64[8]");
}

TEST(GraphTracer, LocationsCarryOverToDecomposedNodes) {
  Graph g = parseOne(R"(graph @f(%x: f32[2, 3]) {
  %s = call_function aten.silu(%x)
  output (%s,)
})");
  g.findNode("s")->meta.loc = SourceLoc{"model.py", 7, "forward"};
  Graph r = retrace(g, DecomposeTo::CoreAten);
  ASSERT_TRUE(calls(r, "aten.sigmoid"));
  for (Node* n : r.nodes())
    if (n->opcode() == Opcode::CallFunction) {
      ASSERT_TRUE(n->meta.loc);
      EXPECT_EQ(n->meta.loc->line, 7);
    }
}

TEST(GraphTracer, InPlaceOpsBecomeFunctionalOpAndCopy) {
  Graph g = parseOne(R"(graph @f(%x: f32[3]) {
  %a = call_function aten.add_.Scalar(%x, 1)
  %m = call_function aten.mul.Tensor(%a, %x)
  output (%m,)
})");
  Graph r = retrace(g, DecomposeTo::CoreAten);
  EXPECT_EQ(targets(r), (std::vector<std::string>{"aten.add.Scalar", "aten.copy_", "aten.mul.Tensor"}));
  // Later uses read the mutated value: the copy_ node.
  Node* mul = r.outputNode()->args()[0].items()[0].toNode();
  EXPECT_EQ(mul->args()[0].toNode()->target(), "aten.copy_");
  EXPECT_EQ(mul->args()[1].toNode()->target(), "aten.copy_");
}

TEST(GraphTracer, FactoriesInDecompositionsGetTheRealDevice) {
  Graph g = parseOne(R"(graph @f(%x: f32[3]{device=cuda:0}) {
  %z = call_function aten.new_zeros(%x, [2])
  %c = call_function aten.zeros_like(%x)
  output (%z, %c)
})");
  Graph r = retrace(g, DecomposeTo::CoreAten);
  EXPECT_EQ(targets(r), (std::vector<std::string>{"aten.full", "aten.full_like"}));
  for (const Argument& a : r.outputNode()->args()[0].items())
    EXPECT_EQ(a.toNode()->meta.type->tensor().device.str(), "cuda:0");
  EXPECT_EQ(printGraph(r).find("meta"), std::string::npos) << printGraph(r);
}

TEST(GraphTracer, OpErrorsComeFromTheOpItself) {
  Graph g = parseOne(R"(graph @f(%x: i64[3]) {
  %s = call_function aten.softmax.int(%x, 0)
  output (%s,)
})");
  EXPECT_THROW(retrace(g, DecomposeTo::CoreAten), NotImplementedError);
}

TEST(GraphTracer, UntypedInputsAndUnknownTargetsAreRejected) {
  Graph untyped = parseOne(R"(graph @f(%x) {
  %r = call_function aten.relu(%x)
  output (%r,)
})");
  EXPECT_THROW(retrace(untyped, DecomposeTo::None), Error);
  Graph other = parseOne(R"(graph @f(%x: f32[2]) {
  %r = call_module layer(%x)
  output (%r,)
})");
  EXPECT_THROW(retrace(other, DecomposeTo::None), Error);
}

TEST(Decompositions, TableCoversNamedCompositeAndInPlaceOps) {
  EXPECT_NE(compiler::decompositionOf(OpId::softmax_int), nullptr); // decompose: softmax
  EXPECT_NE(compiler::decompositionOf(OpId::linear), nullptr);      // its composite kernel
  EXPECT_NE(compiler::decompositionOf(OpId::add__Tensor), nullptr); // functional + copy_
  // copy_ decomposes to prims.copy_to, but only at the prims level: core ATen keeps it.
  EXPECT_NE(compiler::decompositionOf(OpId::copy_), nullptr);
  EXPECT_FALSE(compiler::needsDecomposition(OpId::copy_, compiler::DecomposeTo::CoreAten));
  EXPECT_TRUE(compiler::needsDecomposition(OpId::copy_, compiler::DecomposeTo::Prims));
}
