// Graph sizes are the loop IR's symbolic integers (ir/IndexExpr.h): the graph text prints them
// canonically and the graph parser reads the printed form back to an equal expression.
#include <cstdint>
#include <gtest/gtest.h>

#include "ir/IndexExpr.h"
#include "ir/Parser.h"
#include "ir/loop/Parser.h"
#include "ir/Printer.h"

using namespace kiln;

namespace {

const IndexExpr s0 = IndexExpr::var("s0");
const IndexExpr s1 = IndexExpr::var("s1");

// The size the parser builds from a size written in a type annotation.
IndexExpr parseSize(const std::string& text) {
  Graph g = parseGraph("graph @f(%x: f32[" + text + "]) {\n  output %x\n}\n");
  return g.first()->meta.type->tensor().sizes.at(0);
}

} // namespace

TEST(SymbolicSize, TypesPrintSymbolicDims) {
  TensorType t{ScalarType::Float32, {s0, 64}, std::nullopt, {}};
  EXPECT_EQ(t.str(), "f32[s0, 64]");
  t.sizes = {2 * s0 + 1, floorDiv(s1, 4), min(s0, 8)};
  EXPECT_EQ(t.str(), "f32[2*s0 + 1, floordiv(s1, 4), min(s0, 8)]");
  EXPECT_FALSE(t.isStatic());
}

TEST(SymbolicSize, PrintedFormParsesToAnEqualExpression) {
  const std::vector<IndexExpr> cases = {
      IndexExpr(0),
      IndexExpr(INT64_MIN),
      IndexExpr(INT64_MAX),
      s0,
      2 * s0,
      s0 + 1,
      s0 - (s1 - 1),
      (s0 + 1) * (s1 + 2),
      -s0,
      floorDiv(s0 + 1, 2) * 4,
      mod(floorDiv(s0, s1), 3) - 2 * mod(s1, 5),
      max(s0 - 1, 0) + min(s0, s1),
  };
  for (const IndexExpr& s : cases) {
    IndexExpr back = parseSize(s.str());
    EXPECT_EQ(back, s) << s.str() << " read back as " << back.str();
    EXPECT_EQ(back.str(), s.str());
    // The loop IR reads the same grammar.
    EXPECT_EQ(parseIndexExpr(s.str()), s) << s.str();
  }
}

TEST(SymbolicSize, ParserCanonicalizes) {
  EXPECT_EQ(parseSize("2 * 3 + 1"), IndexExpr(7));
  EXPECT_EQ(parseSize("-s0"), -s0);
  EXPECT_EQ(parseSize("--4"), IndexExpr(4));
  EXPECT_EQ(parseSize("s0 + -3"), s0 - 3);
  EXPECT_EQ(parseSize("s1 + s0"), s0 + s1);
  EXPECT_EQ(parseSize("floordiv(-7, 2)"), IndexExpr(-4));
  EXPECT_EQ(parseSize("(((s0)))"), s0);
  EXPECT_EQ(parseSize("min(s0 + 1, s0)"), s0);
}

TEST(SymbolicSize, ParserRejectsBadSizes) {
  auto error = [](const std::string& size) {
    ParseResult r = parseGraphs("graph @f(%x: f32[" + size + "]) {\n  output %x\n}\n");
    return r.error ? r.error->message : std::string("no error");
  };
  EXPECT_NE(error("floordiv(s0, 0)").find("division by zero"), std::string::npos);
  EXPECT_NE(error("9223372036854775807 + 1").find("overflow"), std::string::npos);
  EXPECT_NE(error("min(s0)").find("expected ','"), std::string::npos);
  EXPECT_NE(error("s0 +").find("expected a size expression"), std::string::npos);
}
