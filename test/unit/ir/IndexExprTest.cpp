// Index expressions: canonical forms, the floor-div/mod rules with and without range facts,
// substitution, evaluation, printing; and properties over random expressions: construction and
// simplification keep the value at every point of a range box, simplify is idempotent, bounds
// hold, and the printed text parses back to the same expression.
#include <cstdint>
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "ir/IndexExpr.h"
#include "ir/loop/Parser.h"
#include "runtime/Error.h"

using namespace kiln;

namespace {

IndexExpr E(const char* text) { return parseIndexExpr(text); }
IndexExpr V(const char* name) { return IndexExpr::var(name); }

RangeFacts facts(std::initializer_list<std::pair<const char*, std::pair<int64_t, int64_t>>> rs) {
  RangeFacts f;
  for (auto& [name, r] : rs)
    f[name] = VarRange{r.first, r.second};
  return f;
}

std::string S(const IndexExpr& e, const RangeFacts& f = {}) { return simplify(e, f).str(); }

} // namespace

TEST(IndexExpr, CanonicalSumsOfProducts) {
  EXPECT_EQ(E("i1 + 16*i0").str(), "16*i0 + i1");
  EXPECT_EQ(E("i0 + i1 - i0").str(), "i1");
  EXPECT_EQ(E("2*(i0 + 1)").str(), "2*i0 + 2");
  EXPECT_EQ(E("i0*(i1 + 1)").str(), "i0 + i0*i1");
  EXPECT_EQ(E("(i0 + 1)*(i0 - 1)").str(), "i0*i0 - 1");
  EXPECT_EQ(E("i1 - 2*i0 - 3").str(), "-2*i0 + i1 - 3");
  EXPECT_EQ(E("-i0").str(), "-i0");
  EXPECT_EQ(E("i10 + i2 + s0").str(), "i2 + i10 + s0");
  EXPECT_EQ(E("3*4 - 20").str(), "-8");
  EXPECT_EQ(E("i0 * 0"), IndexExpr(0));
  EXPECT_EQ(E("16*i0 + i1"), 16 * V("i0") + V("i1"));
  EXPECT_EQ(E("i0 + i1").hash(), E("i1 + i0").hash());
}

TEST(IndexExpr, ConstantsFoldWithPythonFloorSemantics) {
  EXPECT_EQ(E("floordiv(-7, 2)"), IndexExpr(-4));
  EXPECT_EQ(E("mod(-7, 2)"), IndexExpr(1));
  EXPECT_EQ(E("floordiv(7, -2)"), IndexExpr(-4));
  EXPECT_EQ(E("mod(7, -2)"), IndexExpr(-1));
  EXPECT_EQ(E("mod(-8, 4)"), IndexExpr(0));
  EXPECT_EQ(E("floordiv(-9223372036854775808, 1)"), IndexExpr(INT64_MIN));
  EXPECT_THROW(E("floordiv(-9223372036854775808, -1)"), IRError);
  EXPECT_THROW(E("9223372036854775807 + 1"), IRError);
  EXPECT_THROW(E("floordiv(i0, 0)"), IRError);
  EXPECT_THROW(E("mod(3, 0)"), IRError);
}

TEST(IndexExpr, RulesThatHoldEverywhere) {
  // (a*c + b) // c -> a + b // c; (a*c + b) % c -> b % c
  EXPECT_EQ(E("floordiv(4*i0 + i1, 4)").str(), "i0 + floordiv(i1, 4)");
  EXPECT_EQ(E("mod(4*i0 + i1, 4)").str(), "mod(i1, 4)");
  EXPECT_EQ(E("floordiv(i0 + 9, 4)").str(), "floordiv(i0 + 1, 4) + 2");
  EXPECT_EQ(E("mod(i0 + 9, 4)").str(), "mod(i0 + 1, 4)");
  // common factors of the dividend and the divisor
  EXPECT_EQ(E("floordiv(2*i0, 4)").str(), "floordiv(i0, 2)");
  EXPECT_EQ(E("mod(6*i0 + 2, 4)").str(), "2*mod(3*i0 + 1, 2)");
  // nested div/mod
  EXPECT_EQ(E("floordiv(floordiv(i0, 2), 3)").str(), "floordiv(i0, 6)");
  EXPECT_EQ(E("mod(mod(i0, 12), 4)").str(), "mod(i0, 4)");
  EXPECT_EQ(E("floordiv(mod(i0, 12), 4)").str(), "mod(floordiv(i0, 4), 3)");
  EXPECT_EQ(E("mod(mod(i0, 3), 4)").str(), "mod(i0, 3)");
  EXPECT_EQ(E("floordiv(mod(i0, 3), 4)").str(), "0");
  // (x // c) * c + x % c -> x, also with a coefficient, other factors and nested divisions
  EXPECT_EQ(E("floordiv(i0, 4)*4 + mod(i0, 4)"), V("i0"));
  EXPECT_EQ(E("3*(4*floordiv(i0 + s0, 4) + mod(i0 + s0, 4)) + 1").str(), "3*i0 + 3*s0 + 1");
  EXPECT_EQ(E("i1*mod(i0, 8) + 8*i1*floordiv(i0, 8)").str(), "i0*i1");
  EXPECT_EQ(E("mod(floordiv(i0, 4), 3) + 3*floordiv(i0, 12)").str(), "floordiv(i0, 4)");
  // trivial divisors
  EXPECT_EQ(E("floordiv(i0, 1)"), V("i0"));
  EXPECT_EQ(E("mod(i0, 1)"), IndexExpr(0));
  EXPECT_EQ(E("floordiv(i0, -2)").str(), "floordiv(-i0, 2)");
  EXPECT_EQ(E("mod(i0, -2)").str(), "-mod(-i0, 2)");
  // symbolic divisors are kept as written
  EXPECT_EQ(E("floordiv(i0, s0)").str(), "floordiv(i0, s0)");
  EXPECT_EQ(E("mod(0, s0)"), IndexExpr(0));
}

TEST(IndexExpr, RulesUnderRangeFacts) {
  RangeFacts f = facts({{"i0", {0, 8}}, {"i1", {0, 4}}, {"i2", {0, 2}}});
  // (a*c + b) // c -> a when 0 <= b < c
  EXPECT_EQ(S(E("floordiv(4*i0 + i1, 4)"), f), "i0");
  // x % c -> x when 0 <= x < c
  EXPECT_EQ(S(E("mod(i1, 4)"), f), "i1");
  EXPECT_EQ(S(E("mod(4*i0 + i1, 4)"), f), "i1");
  EXPECT_EQ(S(E("mod(i0, 16)"), f), "i0");
  EXPECT_EQ(S(E("mod(2*i2 + i1, 8)"), f), "i1 + 2*i2");
  EXPECT_EQ(S(E("floordiv(2*i2 + i1, 8)"), f), "0");
  // a quotient constant over the range
  EXPECT_EQ(S(E("floordiv(i1 + 4, 4)"), f), "1");
  EXPECT_EQ(S(E("mod(i1 + 4, 8)"), f), "i1 + 4");
  // the view composition of a reshape [32] -> [8, 4] -> [32]
  IndexExpr flat = 4 * V("i0") + V("i1");
  EXPECT_EQ(S(floorDiv(flat, 4), f), "i0");
  EXPECT_EQ(S(mod(flat, 4), f), "i1");
  // unknown variables stay unbounded
  EXPECT_EQ(S(E("mod(j, 4)"), f), "mod(j, 4)");
  // ranges that do not fit leave the expression alone
  EXPECT_EQ(S(E("mod(i0, 4)"), f), "mod(i0, 4)");
  RangeFacts neg = facts({{"k", {-3, 0}}});
  EXPECT_EQ(S(E("floordiv(k, 4)"), neg), "-1");
  EXPECT_EQ(S(E("mod(k, 4)"), neg), "k + 4");
}

TEST(IndexExpr, SubstituteComposesViews) {
  // A [4, 16] view read through a flat index x: 16*i0 + i1 with i0 = x // 16, i1 = x % 16.
  IndexExpr x = V("x");
  IndexExpr e = E("16*i0 + i1").substitute({{"i0", floorDiv(x, 16)}, {"i1", mod(x, 16)}});
  EXPECT_EQ(e, x);
  EXPECT_EQ(E("i0 + s0").substitute({{"i0", E("2*s0")}}).str(), "3*s0");
  EXPECT_EQ(E("i0").substitute({{"i0", E("i1")}, {"i1", E("i0")}}).str(), "i1");
}

TEST(IndexExpr, DivmodIdentityOverSizeSymbols) {
  // A [2, s0, 64] buffer read as [2*s0, 64] (a reshape merging dims of symbolic size): the
  // merged index is affine again, so an extern GEMM reads it in place instead of a copy.
  EXPECT_EQ(E("64*s0*floordiv(i0, s0) + 64*mod(i0, s0) + i1").str(), "64*i0 + i1");
  EXPECT_EQ(E("2*s0*s1*floordiv(x, s0*s1) + 2*mod(x, s0*s1)").str(), "2*x");
  EXPECT_EQ(E("s0*floordiv(x, 2*s0) + mod(x, 2*s0)").str(), "s0*floordiv(x, 2*s0) + mod(x, 2*s0)");
  EXPECT_EQ(E("s0*floordiv(x, s0 + 1) + mod(x, s0 + 1)").str(), "s0*floordiv(x, s0 + 1) + mod(x, s0 + 1)");
}

TEST(IndexExpr, EvaluateAndVariables) {
  IndexExpr e = E("16*i0 + floordiv(i1, 3) - mod(s0, 5)");
  EXPECT_EQ(e.evaluate({{"i0", 2}, {"i1", -4}, {"s0", 12}}), 32 - 2 - 2);
  EXPECT_THROW(e.evaluate({{"i0", 2}}), Error);
  EXPECT_THROW(E("floordiv(i0, s0)").evaluate({{"i0", 2}, {"s0", 0}}), Error);
  EXPECT_THROW(E("i0*i0").evaluate({{"i0", INT64_MAX}}), Error);
  EXPECT_EQ(e.variables(), (std::vector<std::string>{"i0", "i1", "s0"}));
}

TEST(IndexExpr, BoundsUnderFacts) {
  RangeFacts f = facts({{"i0", {0, 8}}, {"i1", {-2, 4}}});
  Bounds b = bounds(E("16*i0 + i1"), f);
  EXPECT_EQ(b.lo, -2);
  EXPECT_EQ(b.hi, 115);
  b = bounds(E("mod(j, 5)"), f);
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, 4);
  b = bounds(E("i0 - j"), f);
  EXPECT_FALSE(b.lo);
  EXPECT_FALSE(b.hi);
  b = bounds(E("-i1*i1"), f);
  EXPECT_EQ(b.lo, -9); // interval arithmetic: (-1 * [-2, 3]) * [-2, 3] = [-9, 6]
  EXPECT_EQ(b.hi, 6);
}

TEST(IndexExpr, PrintedTextParsesBack) {
  for (const char* text :
       {"16*i0 + i1", "floordiv(i0, 4)", "mod(i1, 3)", "-i0 + 2*s0 - 1", "-2*i0*i1 - i2",
        "floordiv(mod(3*i0 + 1, 7), 2) + 9223372036854775807", "-9223372036854775808 + i0",
        "mod(floordiv(i0, 4), 3)*s1", "floordiv(i0, s0 + 1)"}) {
    IndexExpr e = E(text);
    EXPECT_EQ(E(e.str().c_str()), e) << text << " -> " << e.str();
  }
  EXPECT_EQ(E("-9223372036854775808*i0 + i1").str(), "-9223372036854775808*i0 + i1");
  EXPECT_EQ(E("i1 - 9223372036854775807*i0 - 1").str(), "-9223372036854775807*i0 + i1 - 1");
}

TEST(IndexExpr, MinAndMax) {
  IndexExpr s0 = V("s0"), s1 = V("s1");
  EXPECT_EQ(min(IndexExpr(3), IndexExpr(-2)), IndexExpr(-2));
  EXPECT_EQ(max(IndexExpr(3), IndexExpr(-2)), IndexExpr(3));
  // A constant difference decides everywhere; the pair is kept in canonical order otherwise.
  EXPECT_EQ(min(s0 + 4, s0 + 1), s0 + 1);
  EXPECT_EQ(max(s0 + 4, s0 + 1), s0 + 4);
  EXPECT_EQ(min(s1, s0), min(s0, s1));
  EXPECT_EQ(min(s1, s0).str(), "min(s0, s1)");
  EXPECT_EQ(max(s0, 8).str(), "max(s0, 8)");
  // Range facts order the operands (a tail loop's extent min(8, s0 - i0) with i0 < s0 - 8).
  EXPECT_EQ(S(min(s0, 8), facts({{"s0", {8, 100}}})), "8");
  EXPECT_EQ(S(max(s0 - 1, 0), facts({{"s0", {1, 100}}})), "s0 - 1");
  EXPECT_EQ(S(min(s0, 8), facts({{"s0", {2, 100}}})), "min(s0, 8)");
  Bounds b = bounds(min(s0, 8), facts({{"s0", {2, 100}}}));
  EXPECT_EQ(b.lo, 2);
  EXPECT_EQ(b.hi, 8);
  EXPECT_EQ(max(s0, 2 * s1).evaluate({{"s0", 5}, {"s1", 3}}), 6);
  EXPECT_EQ(E("min(s0 + 1, max(s1, 2))"), min(s0 + 1, max(s1, 2)));
}

TEST(IndexExpr, MalformedTextIsADiagnostic) {
  auto message = [](const char* text) {
    try {
      parseIndexExpr(text);
    } catch (const IRError& e) {
      return std::to_string(e.diagnostic().pos.col) + ": " + e.diagnostic().message;
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("i0 +"), "5: expected an index expression (an integer, a symbol such as s0 "
                             "or i0, floordiv(a, b), mod(a, b), min(a, b) or max(a, b)), found "
                             "end of input");
  EXPECT_EQ(message("floordiv(i0 4)"), "13: expected ',' in floordiv(a, b), found number 4");
  EXPECT_EQ(message("i0 i1"), "4: unexpected 'i1' after the expression");
  EXPECT_EQ(message("mod(i0, 2 - 2)"), "1: division by zero in an index expression");
  std::string deep(300, '(');
  EXPECT_NE(message(deep.c_str()).find("nesting deeper than"), std::string::npos);
  std::string product;
  for (int i = 0; i < 14; ++i)
    product += "(x" + std::to_string(i) + " + 1)*";
  product += "1";
  EXPECT_NE(message(product.c_str()).find("too large"), std::string::npos);
}

namespace {

// A random expression tree with its own reference evaluator (Python semantics), built into an
// IndexExpr through the public operators.
struct Ast {
  enum Op { Const, Var, Add, Sub, Mul, Div, Mod, Min, Max } op;
  int64_t value = 0;
  std::string name;
  std::shared_ptr<Ast> a, b;
};

std::shared_ptr<Ast> randomAst(std::mt19937& rng, int depth) {
  auto node = std::make_shared<Ast>();
  static const char* vars[] = {"x", "y", "z"};
  int pick = depth <= 0 ? int(rng() % 2) : int(rng() % 11);
  switch (pick) {
  case 0:
    node->op = Ast::Const;
    node->value = int64_t(rng() % 13) - 6;
    return node;
  case 1:
    node->op = Ast::Var;
    node->name = vars[rng() % 3];
    return node;
  case 2:
  case 3:
    node->op = pick == 2 ? Ast::Add : Ast::Sub;
    node->a = randomAst(rng, depth - 1);
    node->b = randomAst(rng, depth - 1);
    return node;
  case 4:
    node->op = Ast::Mul;
    node->a = randomAst(rng, depth - 1);
    node->b = rng() % 3 ? randomAst(rng, 0) : randomAst(rng, depth - 1);
    return node;
  case 9:
  case 10:
    node->op = pick == 9 ? Ast::Min : Ast::Max;
    node->a = randomAst(rng, depth - 1);
    node->b = randomAst(rng, depth - 1);
    return node;
  default: {
    node->op = pick <= 6 ? Ast::Div : Ast::Mod;
    node->a = randomAst(rng, depth - 1);
    auto divisor = std::make_shared<Ast>();
    divisor->op = Ast::Const;
    static const int64_t divisors[] = {2, 3, 4, 6, 8, 1, -2, -3};
    divisor->value = divisors[rng() % 8];
    node->b = divisor;
    return node;
  }
  }
}

int64_t reference(const Ast& n, const std::map<std::string, int64_t>& env) {
  switch (n.op) {
  case Ast::Const:
    return n.value;
  case Ast::Var:
    return env.at(n.name);
  case Ast::Add:
    return reference(*n.a, env) + reference(*n.b, env);
  case Ast::Sub:
    return reference(*n.a, env) - reference(*n.b, env);
  case Ast::Mul:
    return reference(*n.a, env) * reference(*n.b, env);
  case Ast::Div:
    return *pyFloorDiv(reference(*n.a, env), reference(*n.b, env));
  case Ast::Mod:
    return *pyMod(reference(*n.a, env), reference(*n.b, env));
  case Ast::Min:
    return std::min(reference(*n.a, env), reference(*n.b, env));
  case Ast::Max:
    return std::max(reference(*n.a, env), reference(*n.b, env));
  }
  return 0;
}

IndexExpr build(const Ast& n) {
  switch (n.op) {
  case Ast::Const:
    return n.value;
  case Ast::Var:
    return IndexExpr::var(n.name);
  case Ast::Add:
    return build(*n.a) + build(*n.b);
  case Ast::Sub:
    return build(*n.a) - build(*n.b);
  case Ast::Mul:
    return build(*n.a) * build(*n.b);
  case Ast::Div:
    return floorDiv(build(*n.a), build(*n.b));
  case Ast::Mod:
    return mod(build(*n.a), build(*n.b));
  case Ast::Min:
    return min(build(*n.a), build(*n.b));
  case Ast::Max:
    return max(build(*n.a), build(*n.b));
  }
  return 0;
}

} // namespace

TEST(IndexExpr, RandomExpressionsKeepTheirValues) {
  std::mt19937 rng(2024);
  const RangeFacts boxes[] = {
      facts({{"x", {0, 6}}, {"y", {0, 4}}, {"z", {0, 3}}}),
      facts({{"x", {0, 12}}, {"y", {0, 2}}, {"z", {0, 1}}}),
      facts({{"x", {-4, 5}}, {"y", {2, 7}}, {"z", {-3, 0}}}),
  };
  int simplified = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::shared_ptr<Ast> ast = randomAst(rng, 1 + int(rng() % 4));
    const RangeFacts& box = boxes[iter % 3];
    IndexExpr e = build(*ast);
    IndexExpr s = simplify(e, box);
    simplified += s != e;
    ASSERT_EQ(simplify(s, box), s) << e.str() << " -> " << s.str();
    ASSERT_EQ(parseIndexExpr(e.str()), e) << e.str();
    ASSERT_EQ(parseIndexExpr(s.str()), s) << s.str();
    Bounds be = bounds(e, box);
    for (int64_t x = *box.at("x").lo; x < *box.at("x").hi; ++x)
      for (int64_t y = *box.at("y").lo; y < *box.at("y").hi; ++y)
        for (int64_t z = *box.at("z").lo; z < *box.at("z").hi; ++z) {
          std::map<std::string, int64_t> env{{"x", x}, {"y", y}, {"z", z}};
          int64_t want = reference(*ast, env);
          ASSERT_EQ(e.evaluate(env), want) << e.str() << " at " << x << "," << y << "," << z;
          ASSERT_EQ(s.evaluate(env), want) << e.str() << " -> " << s.str() << " at " << x << ","
                                           << y << "," << z;
          if (be.lo) {
            ASSERT_GE(want, *be.lo) << e.str();
          }
          if (be.hi) {
            ASSERT_LE(want, *be.hi) << e.str();
          }
        }
  }
  // The facts are not idle: a good share of the expressions get simpler.
  EXPECT_GT(simplified, 200);
}
