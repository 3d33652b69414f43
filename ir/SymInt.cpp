// Symbolic integers: construction with constant folding, structural equality and printing.
#include "ir/SymInt.h"

#include <functional>

#include "ir/Identifier.h"
#include "runtime/Error.h"

namespace kiln {

struct SymInt::Expr {
  Kind kind;
  std::string name; // Symbol
  SymInt lhs, rhs;  // binary kinds
};

SymInt::SymInt(int64_t value) : value_(value) {}

SymInt SymInt::symbol(std::string name) {
  // Symbols print bare inside sizes, so they must read back as identifiers.
  if (!isIdentifier(name))
    throw Error("invalid symbol name '" + name + "': use letters, digits and _");
  return SymInt(std::make_shared<const Expr>(Expr{Kind::Symbol, std::move(name), {}, {}}));
}

SymInt::Kind SymInt::kind() const { return expr_ ? expr_->kind : Kind::Constant; }

std::optional<int64_t> SymInt::constant() const {
  if (expr_) return std::nullopt;
  return value_;
}

const std::string& SymInt::name() const {
  static const std::string empty;
  return expr_ ? expr_->name : empty;
}

const SymInt& SymInt::lhs() const { return expr_->lhs; }
const SymInt& SymInt::rhs() const { return expr_->rhs; }

namespace {

// Python's a // b and a % b on int64; nullopt for b == 0 or overflow (INT64_MIN // -1).
std::optional<int64_t> pyFloorDiv(int64_t a, int64_t b) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::optional<int64_t> pyMod(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

std::optional<int64_t> fold(SymInt::Kind k, int64_t a, int64_t b) {
  int64_t r;
  switch (k) {
  case SymInt::Kind::Add:
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
  case SymInt::Kind::Sub:
    if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
    return r;
  case SymInt::Kind::Mul:
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
  case SymInt::Kind::FloorDiv:
    return pyFloorDiv(a, b);
  case SymInt::Kind::Mod:
    return pyMod(a, b);
  default:
    return std::nullopt;
  }
}

// Additive 1, multiplicative 2, atoms (constants, symbols, floordiv(...), mod(...)) 3.
int precedence(SymInt::Kind k) {
  switch (k) {
  case SymInt::Kind::Add:
  case SymInt::Kind::Sub:
    return 1;
  case SymInt::Kind::Mul:
    return 2;
  default:
    return 3;
  }
}

} // namespace

SymInt SymInt::binary(Kind k, const SymInt& a, const SymInt& b) {
  auto ca = a.constant(), cb = b.constant();
  if (ca && cb)
    if (auto r = fold(k, *ca, *cb)) return SymInt(*r);
  // x + -3 reads better as x - 3 (and the other way round).
  if ((k == Kind::Add || k == Kind::Sub) && cb && *cb < 0 && *cb != INT64_MIN)
    return binary(k == Kind::Add ? Kind::Sub : Kind::Add, a, SymInt(-*cb));
  bool additive = k == Kind::Add || k == Kind::Sub;
  if (additive && cb == 0) return a;
  if (k == Kind::Add && ca == 0) return b;
  if ((k == Kind::Mul || k == Kind::FloorDiv) && cb == 1) return a;
  if (k == Kind::Mul && ca == 1) return b;
  return SymInt(std::make_shared<const Expr>(Expr{k, {}, a, b}));
}

SymInt operator+(const SymInt& a, const SymInt& b) {
  return SymInt::binary(SymInt::Kind::Add, a, b);
}
SymInt operator-(const SymInt& a, const SymInt& b) {
  return SymInt::binary(SymInt::Kind::Sub, a, b);
}
SymInt operator*(const SymInt& a, const SymInt& b) {
  return SymInt::binary(SymInt::Kind::Mul, a, b);
}
SymInt floorDiv(const SymInt& a, const SymInt& b) {
  return SymInt::binary(SymInt::Kind::FloorDiv, a, b);
}
SymInt mod(const SymInt& a, const SymInt& b) { return SymInt::binary(SymInt::Kind::Mod, a, b); }

bool SymInt::operator==(const SymInt& o) const {
  if (kind() != o.kind()) return false;
  if (!expr_) return value_ == o.value_;
  if (expr_ == o.expr_) return true;
  if (expr_->kind == Kind::Symbol) return expr_->name == o.expr_->name;
  return expr_->lhs == o.expr_->lhs && expr_->rhs == o.expr_->rhs;
}

size_t SymInt::hash() const {
  if (!expr_) return std::hash<int64_t>()(value_);
  size_t h = size_t(expr_->kind) * 0x9e3779b97f4a7c15ull;
  if (expr_->kind == Kind::Symbol) return h ^ std::hash<std::string>()(expr_->name);
  return h ^ (expr_->lhs.hash() * 31 + expr_->rhs.hash());
}

std::string SymInt::str() const {
  if (!expr_) return std::to_string(value_);
  if (expr_->kind == Kind::Symbol) return expr_->name;
  std::string l = expr_->lhs.str(), r = expr_->rhs.str();
  if (expr_->kind == Kind::FloorDiv) return "floordiv(" + l + ", " + r + ")";
  if (expr_->kind == Kind::Mod) return "mod(" + l + ", " + r + ")";
  // Left-associative: the left operand needs parentheses only when it binds more loosely, the
  // right one also when it binds equally (a - (b - c), a*(b*c)).
  int p = precedence(expr_->kind);
  if (precedence(expr_->lhs.kind()) < p) l = "(" + l + ")";
  if (precedence(expr_->rhs.kind()) <= p) r = "(" + r + ")";
  return l + (expr_->kind == Kind::Add ? " + " : expr_->kind == Kind::Sub ? " - " : "*") + r;
}

} // namespace kiln
