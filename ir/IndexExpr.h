// IndexExpr: immutable, canonical symbolic integer expressions over size symbols (s0) and loop
// variables (i0, r0). The one symbolic-integer library of kiln: graph types' sizes and strides
// (ir/Type.h) and the loop IR's extents and indices, so loop indices can contain graph size
// symbols. Simplification uses range facts.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

class IndexExpr;

// What is known about a variable: lo <= v < hi. Either end may be open.
struct VarRange {
  std::optional<int64_t> lo, hi;
};
using RangeFacts = std::map<std::string, VarRange>;

// Inclusive bounds of an expression; nullopt ends are unbounded.
struct Bounds {
  std::optional<int64_t> lo, hi;
};

// Expressions are built by the operators below and are always in canonical form, so two
// expressions with the same canonical form compare equal:
//  - Const c; Var name
//  - Mul: coefficient (not 0, not 1 when there is a single factor) times factors sorted by
//    the canonical order; factors are Vars, FloorDivs and Mods (products distribute over sums)
//  - Add: terms sorted by their factors with like terms combined (at least two, or one and a
//    nonzero constant), plus a constant
//  - FloorDiv(a, b), Mod(a, b): Python's // and %, a not constant; b a constant > 1 or a
//    non-constant expression (negative constant divisors are rewritten, see below)
//  - Min(a, b), Max(a, b): a before b in the canonical order (a constant last), neither
//    provably the answer (their difference is not a constant, range facts do not order them)
// Construction folds constants (Python floor semantics), distributes, combines like terms and
// applies the rules that hold for every value of the variables (docs/loop-ir.md lists them).
// `simplify` additionally uses range facts. Integer overflow in a constant and a constant
// division by zero throw kiln::Error.
class IndexExpr {
public:
  enum class Kind : uint8_t { Const, Var, Add, Mul, FloorDiv, Mod, Min, Max };

  IndexExpr() : IndexExpr(int64_t(0)) {}
  IndexExpr(int64_t value);
  IndexExpr(int value) : IndexExpr(int64_t(value)) {}
  // A variable; the name must be an identifier (throws kiln::Error otherwise).
  static IndexExpr var(const std::string& name);

  Kind kind() const;
  bool isConstant() const { return kind() == Kind::Const; }
  std::optional<int64_t> constant() const;
  // Var: its name.
  const std::string& name() const;
  // Add: the constant part. Mul: the coefficient.
  int64_t scalar() const;
  // Add: the terms (without the constant). Mul: the factors. FloorDiv/Mod: {dividend, divisor}.
  // Min/Max: the two operands.
  const std::vector<IndexExpr>& operands() const;

  friend IndexExpr operator+(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr operator-(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr operator-(const IndexExpr& a);
  friend IndexExpr operator*(const IndexExpr& a, const IndexExpr& b);
  // Python's a // b and a % b.
  friend IndexExpr floorDiv(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr mod(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr min(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr max(const IndexExpr& a, const IndexExpr& b);

  bool operator==(const IndexExpr& o) const;
  bool operator!=(const IndexExpr& o) const { return !(*this == o); }
  size_t hash() const;
  // A total order on expressions (the order terms and factors are kept in): variables by
  // name with digit runs compared as numbers (i2 before i10).
  static int compare(const IndexExpr& a, const IndexExpr& b);

  // "16*i0 + i1", "floordiv(i0, 4)", "mod(i1, 3)", "min(s0, 8)", "-i0 + 2*s0 - 1"; reads back
  // with parseIndexExpr (ir/loop/Parser.h) or as a graph size to an equal expression.
  std::string str() const;

  // Replaces variables by expressions (all at once, not repeatedly); the result is canonical.
  IndexExpr substitute(const std::map<std::string, IndexExpr>& replacements) const;
  // The value with every variable bound; throws kiln::Error on an unbound variable, a division
  // by zero or int64 overflow.
  int64_t evaluate(const std::map<std::string, int64_t>& bindings) const;
  // The variable names that occur, sorted by the canonical order and without repeats.
  std::vector<std::string> variables() const;

private:
  struct Node;
  explicit IndexExpr(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  static IndexExpr make(Kind k, int64_t scalar, std::string name, std::vector<IndexExpr> ops);
  friend struct IndexBuilder;

  std::shared_ptr<const Node> node_;
};

struct IndexExprHash {
  size_t operator()(const IndexExpr& e) const { return e.hash(); }
};

// Inclusive bounds of `e` when each variable is in its range (unknown variables unbounded).
Bounds bounds(const IndexExpr& e, const RangeFacts& facts);

// The canonical form of `e` under `facts` (docs/loop-ir.md lists the rules): equal to `e` at
// every point where the facts hold and `e` is defined, and idempotent.
IndexExpr simplify(const IndexExpr& e, const RangeFacts& facts = {});

// Python's // and % on int64; nullopt on division by zero or overflow.
std::optional<int64_t> pyFloorDiv(int64_t a, int64_t b);
std::optional<int64_t> pyMod(int64_t a, int64_t b);

} // namespace kiln
