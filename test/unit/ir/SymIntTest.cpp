// Symbolic integers: folding with Python's rules, structural equality, printing, and that the
// parser reads the printed form back to the same tree.
#include <gtest/gtest.h>

#include "ir/Parser.h"
#include "ir/SymInt.h"

using namespace kiln;

namespace {

const SymInt s0 = SymInt::symbol("s0");
const SymInt s1 = SymInt::symbol("s1");

// The SymInt the parser builds from a size written in a type annotation.
SymInt parseSize(const std::string& text) {
  Graph g = parseGraph("graph @f(%x: f32[" + text + "]) {\n  output %x\n}\n");
  return g.first()->meta.type->tensor().sizes.at(0);
}

} // namespace

TEST(SymInt, ConstantsFoldWithPythonSemantics) {
  EXPECT_EQ((SymInt(2) + SymInt(3)).constant(), 5);
  EXPECT_EQ((SymInt(2) - SymInt(3)).constant(), -1);
  EXPECT_EQ((SymInt(4) * SymInt(-3)).constant(), -12);
  EXPECT_EQ(floorDiv(SymInt(-7), SymInt(2)).constant(), -4);
  EXPECT_EQ(floorDiv(SymInt(7), SymInt(-2)).constant(), -4);
  EXPECT_EQ(mod(SymInt(-7), SymInt(3)).constant(), 2);
  EXPECT_EQ(mod(SymInt(7), SymInt(-3)).constant(), -2);
  // Python would raise or grow the int: the expression stays unfolded.
  EXPECT_FALSE(floorDiv(SymInt(1), SymInt(0)).isConstant());
  EXPECT_FALSE(mod(SymInt(1), SymInt(0)).isConstant());
  EXPECT_FALSE((SymInt(INT64_MAX) + SymInt(1)).isConstant());
  EXPECT_FALSE(floorDiv(SymInt(INT64_MIN), SymInt(-1)).isConstant());
}

TEST(SymInt, IdentitiesAreDropped) {
  EXPECT_EQ(s0 + SymInt(0), s0);
  EXPECT_EQ(SymInt(0) + s0, s0);
  EXPECT_EQ(s0 - SymInt(0), s0);
  EXPECT_EQ(s0 * SymInt(1), s0);
  EXPECT_EQ(SymInt(1) * s0, s0);
  EXPECT_EQ(floorDiv(s0, SymInt(1)), s0);
  // Adding a negative constant is written as a subtraction.
  EXPECT_EQ(s0 + SymInt(-3), s0 - SymInt(3));
  EXPECT_EQ((s0 - SymInt(-3)).str(), "s0 + 3");
}

TEST(SymInt, StructuralEqualityAndHash) {
  EXPECT_EQ(s0 * SymInt(2) + s1, s0 * SymInt(2) + s1);
  EXPECT_EQ((s0 * SymInt(2) + s1).hash(), (s0 * SymInt(2) + s1).hash());
  EXPECT_FALSE(s0 + s1 == s1 + s0); // no canonical ordering (yet)
  EXPECT_FALSE(s0 == s1);
  EXPECT_FALSE(s0 == SymInt(0));
  EXPECT_EQ((s0 + s1).kind(), SymInt::Kind::Add);
  EXPECT_EQ((s0 + s1).lhs(), s0);
  EXPECT_EQ((s0 + s1).rhs(), s1);
  EXPECT_EQ(s0.name(), "s0");
}

TEST(SymInt, Printing) {
  EXPECT_EQ(SymInt(16).str(), "16");
  EXPECT_EQ(SymInt(-4).str(), "-4");
  EXPECT_EQ(s0.str(), "s0");
  EXPECT_EQ((SymInt(2) * s0).str(), "2*s0");
  EXPECT_EQ((s0 + SymInt(1)).str(), "s0 + 1");
  EXPECT_EQ((SymInt(2) * s0 + SymInt(3) * s1).str(), "2*s0 + 3*s1");
  EXPECT_EQ(((s0 + SymInt(1)) * s1).str(), "(s0 + 1)*s1");
  EXPECT_EQ((s0 - (s1 - SymInt(1))).str(), "s0 - (s1 - 1)");
  EXPECT_EQ(((s0 - s1) - SymInt(1)).str(), "s0 - s1 - 1");
  EXPECT_EQ((s0 * (s1 * SymInt(2))).str(), "s0*(s1*2)");
  EXPECT_EQ(floorDiv(s0 + SymInt(1), SymInt(2)).str(), "floordiv(s0 + 1, 2)");
  EXPECT_EQ((mod(s0, SymInt(3)) * SymInt(4)).str(), "mod(s0, 3)*4");
  EXPECT_EQ((s0 * SymInt(-2)).str(), "s0*-2");
  EXPECT_EQ(floorDiv(SymInt(1), SymInt(0)).str(), "floordiv(1, 0)");
}

TEST(SymInt, SymbolNamesAreIdentifiers) {
  EXPECT_NO_THROW(SymInt::symbol("u_0"));
  EXPECT_THROW(SymInt::symbol(""), Error);
  EXPECT_THROW(SymInt::symbol("0s"), Error);
  EXPECT_THROW(SymInt::symbol("s 0"), Error);
}

TEST(SymInt, PrintedFormParsesToTheSameTree) {
  const std::vector<SymInt> cases = {
      SymInt(0),
      SymInt(INT64_MIN),
      SymInt(INT64_MAX),
      s0,
      SymInt(2) * s0,
      s0 + SymInt(1),
      s0 - (s1 - SymInt(1)),
      (s0 - s1) - SymInt(1),
      (s0 + SymInt(1)) * (s1 + SymInt(2)),
      s0 * (s1 * SymInt(2)),
      SymInt(-1) * s0,
      s0 * SymInt(-2),
      floorDiv(s0 + SymInt(1), SymInt(2)) * SymInt(4),
      mod(floorDiv(s0, s1), SymInt(3)) - SymInt(2) * mod(s1, SymInt(5)),
      floorDiv(SymInt(1), SymInt(0)),
  };
  for (const SymInt& s : cases) {
    SymInt back = parseSize(s.str());
    EXPECT_EQ(back, s) << s.str() << " read back as " << back.str();
    EXPECT_EQ(back.str(), s.str());
  }
}

TEST(SymInt, ParserFoldsAndNormalizes) {
  EXPECT_EQ(parseSize("2 * 3 + 1"), SymInt(7));
  EXPECT_EQ(parseSize("-s0"), SymInt(-1) * s0);
  EXPECT_EQ(parseSize("--4"), SymInt(4));
  EXPECT_EQ(parseSize("s0 + -3"), s0 - SymInt(3));
  EXPECT_EQ(parseSize("floordiv(-7, 2)"), SymInt(-4));
  EXPECT_EQ(parseSize("(((s0)))"), s0);
}
