// Graph mutation APIs: creation and naming, users kept in sync, insertion points, moves,
// erasure, use replacement, deep copies, and the verifier's view of the results.
#include <cstdint>
#include <gtest/gtest.h>

#include <limits>

#include "ir/Graph.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

using namespace kiln;

namespace {

TensorType f32(std::vector<IndexExpr> sizes) {
  TensorType t;
  t.sizes = std::move(sizes);
  return t;
}

std::vector<std::string> names(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes())
    out.push_back(n->name());
  return out;
}

} // namespace

TEST(Graph, CreateNamesNodesAfterTheirTargets) {
  Graph g("fn");
  Node* x = g.placeholder("x", Type(f32({2})));
  Node* a = g.callFunction(OpId::add_Tensor, {x, x});
  Node* b = g.callFunction("aten.add.Tensor", {a, x});
  Node* c = g.callMethod("add", {b, 1});
  Node* p = g.getAttr("layers.0.weight");
  Node* m = g.callModule("layers.0", {x});
  Node* i = g.callFunction("operator.getitem", {m, 0});
  g.output(Argument::tuple({c, p, i}));
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "add", "add_1", "add_2", "layers_0_weight",
                                                "layers_0", "getitem", "output"}));
  EXPECT_EQ(a->target(), "aten.add.Tensor");
  EXPECT_EQ(a->op(), OpId::add_Tensor);
  EXPECT_FALSE(c->isOp());
  EXPECT_EQ(g.findNode("add_1"), b);
  EXPECT_EQ(g.findNode("nope"), nullptr);
  EXPECT_EQ(g.placeholders(), std::vector<Node*>{x});
  EXPECT_EQ(g.outputNode(), g.last());
  EXPECT_TRUE(verify(g).empty());
}

TEST(Graph, AtenTargetsResolveAgainstTheOpTable) {
  Graph g;
  Node* x = g.placeholder("x");
  EXPECT_EQ(g.callFunction("aten.clone.default", {x})->target(), "aten.clone");
  EXPECT_THROW(g.callFunction("aten.add", {x, x}), IRError);
  EXPECT_THROW(g.callFunction("aten.no_such_op", {x}), IRError);
}

TEST(Graph, ExplicitNamesMustBeFreeAndValid) {
  Graph g;
  g.placeholder("x");
  EXPECT_THROW(g.placeholder("x"), IRError);
  EXPECT_THROW(g.create(Opcode::CallFunction, "kiln.f", {}, {}, "bad name"), IRError);
  EXPECT_THROW(g.create(Opcode::CallMethod, ""), IRError);
}

TEST(Graph, UsersFollowArgsAndKwargs) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.callFunction("kiln.f", {Argument::list({x, x, Argument::tuple({y})})}, {{"k", x}});
  EXPECT_EQ(x->users(), std::vector<Node*>{a});
  EXPECT_EQ(y->users(), std::vector<Node*>{a});
  EXPECT_EQ(a->inputs(), (std::vector<Node*>{x, y}));
  a->setArgs({1});
  EXPECT_EQ(x->users(), std::vector<Node*>{a}); // still used through the kwarg
  EXPECT_TRUE(y->users().empty());
  a->setKwargs({});
  EXPECT_TRUE(x->users().empty());
  a->setArg(0, y);
  EXPECT_EQ(y->users(), std::vector<Node*>{a});
  EXPECT_THROW(a->setArg(3, y), IRError);
  EXPECT_EQ(a->kwarg("k"), nullptr);
}

TEST(Graph, ReferencesToAnotherGraphAreRejected) {
  Graph g1("one"), g2("two");
  Node* x = g1.placeholder("x");
  EXPECT_THROW(g2.callFunction("kiln.f", {x}), IRError);
  Node* y = g2.placeholder("y");
  Node* f = g2.callFunction("kiln.f", {y});
  EXPECT_THROW(f->setArgs({x}), IRError);
  EXPECT_EQ(f->args()[0].toNode(), y);
  EXPECT_TRUE(x->users().empty());
}

TEST(Graph, InsertionPointAndGuard) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* out = g.output(x);
  {
    Graph::InsertionGuard guard(g);
    g.setInsertionPointBefore(out);
    g.callFunction("kiln.a", {x});
    g.callFunction("kiln.b", {x});
    g.setInsertionPointAfter(x);
    g.callFunction("kiln.c", {x});
  }
  g.callFunction("kiln.d", {x}); // the guard restored "at the end"
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "c", "a", "b", "output", "d"}));
  auto diags = verify(g);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_NE(diags[0].message.find("%d: comes after the output node"), std::string::npos);
}

TEST(Graph, MovesKeepTheListConsistent) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.callFunction("kiln.a", {x});
  Node* b = g.callFunction("kiln.b", {x});
  Node* c = g.callFunction("kiln.c", {a});
  g.output(c);
  g.moveAfter(a, b);
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "b", "a", "c", "output"}));
  EXPECT_EQ(a->prev(), b);
  EXPECT_EQ(a->next(), c);
  EXPECT_EQ(x->prev(), nullptr);
  EXPECT_EQ(g.last()->next(), nullptr);
  EXPECT_TRUE(verify(g).empty());
  // Moving a node before its input is allowed by the API and caught by the verifier.
  g.moveBefore(c, a);
  auto diags = verify(g);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].message, "%c: uses %a before its definition");
  // So is a placeholder that is no longer first.
  g.moveBefore(c, g.last());
  g.moveAfter(x, b);
  diags = verify(g);
  ASSERT_FALSE(diags.empty());
  EXPECT_NE(diags[0].message.find("placeholders must come before every other node"),
            std::string::npos);
}

TEST(Graph, EraseRequiresNoUsers) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.callFunction("kiln.a", {x});
  Node* b = g.callFunction("kiln.b", {a, a});
  g.output(b);
  try {
    g.erase(a);
    FAIL() << "erase of a used node must throw";
  } catch (const IRError& e) {
    EXPECT_STREQ(e.what(), "cannot erase %a: it still has 1 user(s): %b");
  }
  g.replaceAllUsesWith(a, x);
  EXPECT_EQ(b->args()[0].toNode(), x);
  EXPECT_TRUE(a->users().empty());
  EXPECT_EQ(x->users().size(), 2u);
  g.erase(a);
  EXPECT_EQ(g.findNode("a"), nullptr);
  EXPECT_EQ(g.size(), 3u);
  // The name is free again, but fresh names do not reuse it.
  EXPECT_EQ(g.uniqueName("a"), "a_1");
  EXPECT_TRUE(verify(g).empty());
}

TEST(Graph, ReplaceAllUsesWithAConstant) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* k = g.callFunction("operator.add", {2, 3});
  Node* f = g.callFunction("kiln.f", {x, Argument::list({k})}, {{"n", k}});
  g.output(Argument::tuple({f, k}));
  g.replaceAllUsesWith(k, Argument(int64_t(5)));
  EXPECT_TRUE(k->users().empty());
  g.erase(k);
  EXPECT_EQ(printGraph(g), "graph @graph(%x) {\n"
                           "  %f = call_function kiln.f(%x, [5], n=5)\n"
                           "  output (%f, 5)\n"
                           "}\n");
}

TEST(Graph, ErasingDuringIterationIsSafe) {
  Graph g;
  Node* x = g.placeholder("x");
  for (int i = 0; i < 5; ++i)
    g.callFunction("kiln.f", {x, i});
  g.output(x);
  for (Node* n : g.nodes())
    if (n->opcode() == Opcode::CallFunction) g.erase(n);
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "output"}));
}

TEST(Graph, CloneIsDeepAndIndependent) {
  Graph g = parseGraph(R"(graph @fn(%x: f32[s0, 2]{device=cuda:0}, %y) {
  %a = call_function aten.add.Tensor(%x, %y, alpha=2) : f32[s0, 2] loc("m.py":3:forward)
  %b = call_method view(%a, [-1], key={"k": (%a, slice(None, 2, None))})
  output (%a, %b)
}
)");
  Graph copy = g.clone();
  EXPECT_TRUE(structurallyEqual(g, copy));
  EXPECT_EQ(printGraph(copy), printGraph(g));
  Node* a = copy.findNode("a");
  EXPECT_EQ(a->graph(), &copy);
  EXPECT_EQ(copy.findNode("b")->inputs(), std::vector<Node*>{a});
  EXPECT_NE(a, g.findNode("a"));
  copy.findNode("b")->setKwargs({});
  EXPECT_FALSE(structurallyEqual(g, copy));
  EXPECT_EQ(g.findNode("b")->kwargs().size(), 1u);
  // Fresh names in the copy continue where the original's would.
  EXPECT_EQ(copy.uniqueName("add"), g.uniqueName("add"));
}

TEST(Graph, MovedGraphsKeepTheirNodes) {
  std::vector<Graph> graphs;
  for (int i = 0; i < 4; ++i) {
    Graph g("g" + std::to_string(i));
    Node* x = g.placeholder("x");
    g.output(g.callFunction("kiln.f", {x}));
    graphs.push_back(std::move(g)); // vector growth moves graphs around
  }
  for (Graph& g : graphs) {
    for (Node* n : g.nodes())
      EXPECT_EQ(n->graph(), &g);
    EXPECT_TRUE(verify(g).empty());
    g.callFunction("kiln.h", {g.first()});
  }
}

TEST(Graph, ParsePrintRoundTripIsStructural) {
  Graph g("every_kind");
  Node* x = g.placeholder("x", Type(f32({IndexExpr::var("s0") * IndexExpr(2), 16})));
  TensorType strided = f32({4, 8});
  strided.strides = std::vector<IndexExpr>{1, 4};
  strided.device = Device(DeviceType::CUDA, 1);
  Node* y = g.placeholder("y", Type(strided));
  Node* f = g.callFunction(
      "kiln.f",
      {Argument(), true, int64_t(-3), 0.1, -0.0, std::numeric_limits<double>::infinity(),
       std::numeric_limits<double>::quiet_NaN(), "s\"\n\x01", ScalarType::BFloat16,
       Device(DeviceType::Meta), Argument::ellipsis(), Argument::slice(Argument(), y, 2),
       Argument::list({x, Argument::tuple({})}), Argument::tuple({1}),
       Argument::dict({{"a", x}, {"b", Argument::dict({})}})},
      {{"kw", 1.5}});
  f->meta.type = Type::tuple({Type(strided), Type::number(Type::Kind::Int)});
  f->meta.loc = SourceLoc{"model.py", 7, "<lambda>"};
  g.output(Argument::tuple({f, y}));
  ASSERT_TRUE(verify(g).empty());
  std::string text = printGraph(g);
  Graph parsed = parseGraph(text);
  EXPECT_TRUE(structurallyEqual(g, parsed)) << text << "\nvs\n" << printGraph(parsed);
  EXPECT_EQ(printGraph(parsed), text);
}

TEST(Verifier, RequireTypes) {
  Graph g =
      parseGraph("graph @f(%x: f32[2]) {\n  %a = call_function aten.clone(%x)\n  output %a\n}\n");
  EXPECT_TRUE(verify(g).empty());
  VerifyOptions options;
  options.requireTypes = true;
  auto diags = verify(g, options);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].message,
            "%a: missing type annotation (every value needs a type at this stage)");
  EXPECT_EQ(diags[0].pos.line, 2);
  EXPECT_EQ(diags[0].pos.col, 3);
  EXPECT_THROW(verifyOrThrow(g, options), IRError);
}

TEST(Verifier, KeywordNamesMustPrintAsKeywords) {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.callFunction("kiln.f", {x}, {{"k", 1}, {"bad key", 2}, {"k", 3}}));
  auto diags = verify(g);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[0].message, "%f: keyword argument name 'bad key' is not an identifier");
  EXPECT_EQ(diags[1].message, "%f: duplicate keyword argument 'k'");
}
