// SymInt: an integer that is either a constant or an expression over named symbols (s0, s1, ...),
// used for tensor sizes and strides in graph types. Built from +, -, *, floordiv and mod.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace kiln {

class SymInt {
public:
  enum class Kind : uint8_t { Constant, Symbol, Add, Sub, Mul, FloorDiv, Mod };

  SymInt() : SymInt(int64_t(0)) {}
  SymInt(int64_t value);
  // A named symbol; the name must be an identifier (throws kiln::Error otherwise).
  static SymInt symbol(std::string name);

  Kind kind() const;
  bool isConstant() const { return expr_ == nullptr; }
  // The value when constant.
  std::optional<int64_t> constant() const;
  // The symbol's name (kind Symbol only).
  const std::string& name() const;
  // The operands of a binary expression (kinds Add..Mod only).
  const SymInt& lhs() const;
  const SymInt& rhs() const;

  // Builders fold constants (with Python's floor semantics for // and %) and drop identities
  // (x + 0, x * 1); anything else stays as written. Division by a constant zero, or an int64
  // overflow while folding, keeps the expression unfolded.
  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt floorDiv(const SymInt& a, const SymInt& b);
  friend SymInt mod(const SymInt& a, const SymInt& b);

  // Structural equality: same tree, same symbol names.
  bool operator==(const SymInt& o) const;
  size_t hash() const;

  // "16", "s0", "2*s0", "s0 + 1", "floordiv(s0, 2)", "mod(s0, 3)": + - * infix (parenthesized
  // only where precedence and left-associativity require it), floordiv and mod as calls (no
  // clash with "//" comments or "%" value names), so parsing the text rebuilds the same tree.
  std::string str() const;

private:
  struct Expr;
  explicit SymInt(std::shared_ptr<const Expr> e) : expr_(std::move(e)) {}
  static SymInt binary(Kind k, const SymInt& a, const SymInt& b);

  int64_t value_ = 0;                // when constant
  std::shared_ptr<const Expr> expr_; // null when constant
};

} // namespace kiln
