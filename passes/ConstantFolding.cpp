// Constant folding of Python-number operations, with CPython's semantics.
#include "passes/ConstantFolding.h"

#include <cstdint>
#include <cmath>
#include <optional>
#include <string_view>

namespace kiln {

namespace {

// Integers up to 2**53 in magnitude convert to double exactly.
constexpr int64_t kExactInDouble = int64_t(1) << 53;
bool exactInDouble(int64_t v) { return v >= -kExactInDouble && v <= kExactInDouble; }

// A Python number; bools take part in arithmetic as the ints 0 and 1.
struct Number {
  bool isFloat = false;
  int64_t i = 0;
  double f = 0;
  double toDouble() const { return isFloat ? f : double(i); }
};

std::optional<Number> number(const Argument& a) {
  switch (a.kind()) {
  case Argument::Kind::Bool:
    return Number{false, a.toBool() ? 1 : 0, 0};
  case Argument::Kind::Int:
    return Number{false, a.toInt(), 0};
  case Argument::Kind::Float:
    return Number{true, 0, a.toFloat()};
  default:
    return std::nullopt;
  }
}

std::optional<Argument> intFloorDiv(int64_t a, int64_t b, bool wantMod) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
  int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) {
    --q;
    r += b;
  }
  return Argument(wantMod ? r : q);
}

// CPython's float_divmod: the quotient rounded toward negative infinity and a remainder with
// the divisor's sign.
std::optional<Argument> floatFloorDiv(double x, double y, bool wantMod) {
  if (y == 0) return std::nullopt;
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return Argument(wantMod ? mod : floordiv);
}

std::optional<Argument> compare(std::string_view op, Number a, Number b) {
  int order; // -1, 0, 1; or 2 when unordered (nan)
  if (!a.isFloat && !b.isFloat) {
    order = a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
  } else {
    if ((!a.isFloat && !exactInDouble(a.i)) || (!b.isFloat && !exactInDouble(b.i)))
      return std::nullopt;
    double x = a.toDouble(), y = b.toDouble();
    order = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
  }
  if (op == "eq") return Argument(order == 0);
  if (op == "ne") return Argument(order != 0);
  if (order == 2) return Argument(false);
  if (op == "lt") return Argument(order < 0);
  if (op == "le") return Argument(order <= 0);
  if (op == "gt") return Argument(order > 0);
  return Argument(order >= 0); // ge
}

std::optional<Argument> binary(std::string_view op, Number a, Number b) {
  if (op == "eq" || op == "ne" || op == "lt" || op == "le" || op == "gt" || op == "ge")
    return compare(op, a, b);
  bool isFloat = a.isFloat || b.isFloat;
  if (op == "truediv") {
    if (b.toDouble() == 0) return std::nullopt;
    if ((!a.isFloat && !exactInDouble(a.i)) || (!b.isFloat && !exactInDouble(b.i)))
      return std::nullopt;
    return Argument(a.toDouble() / b.toDouble());
  }
  if (op == "floordiv" || op == "mod") {
    bool wantMod = op == "mod";
    return isFloat ? floatFloorDiv(a.toDouble(), b.toDouble(), wantMod)
                   : intFloorDiv(a.i, b.i, wantMod);
  }
  if (isFloat) {
    double x = a.toDouble(), y = b.toDouble();
    if (op == "add") return Argument(x + y);
    if (op == "sub") return Argument(x - y);
    if (op == "mul") return Argument(x * y);
    return std::nullopt;
  }
  int64_t r;
  bool overflow;
  if (op == "add")
    overflow = __builtin_add_overflow(a.i, b.i, &r);
  else if (op == "sub")
    overflow = __builtin_sub_overflow(a.i, b.i, &r);
  else if (op == "mul")
    overflow = __builtin_mul_overflow(a.i, b.i, &r);
  else
    return std::nullopt;
  if (overflow) return std::nullopt;
  return Argument(r);
}

std::optional<Argument> unary(std::string_view op, Number a) {
  if (a.isFloat) {
    if (op == "neg") return Argument(-a.f);
    if (op == "pos") return Argument(a.f);
    return std::nullopt;
  }
  if (op == "neg") return a.i == INT64_MIN ? std::nullopt : std::optional<Argument>(Argument(-a.i));
  if (op == "pos") return Argument(a.i);
  return std::nullopt;
}

std::optional<Argument> getItem(const Argument& seq, const Argument& index) {
  if (!seq.isSequence() || index.kind() != Argument::Kind::Int) return std::nullopt;
  int64_t i = index.toInt(), size = int64_t(seq.items().size());
  if (i < -size || i >= size) return std::nullopt;
  return seq.items()[size_t(i < 0 ? i + size : i)];
}

std::optional<Argument> evaluate(const Node& n) {
  constexpr std::string_view prefix = "operator.";
  if (n.opcode() != Opcode::CallFunction || !n.kwargs().empty() || !n.target().starts_with(prefix))
    return std::nullopt;
  for (const Argument& a : n.args()) {
    bool refersToNode = false;
    a.forEachNode([&](Node*) { refersToNode = true; });
    if (refersToNode) return std::nullopt;
  }
  std::string_view op = std::string_view(n.target()).substr(prefix.size());
  const std::vector<Argument>& args = n.args();
  if (op == "getitem" && args.size() == 2) return getItem(args[0], args[1]);
  if (args.size() == 1) {
    if (auto a = number(args[0])) return unary(op, *a);
  } else if (args.size() == 2) {
    auto a = number(args[0]), b = number(args[1]);
    if (a && b) return binary(op, *a, *b);
  }
  return std::nullopt;
}

} // namespace

void foldConstants(Graph& g) {
  for (Node* n : g.nodes()) {
    std::optional<Argument> value = evaluate(*n);
    if (!value) continue;
    g.replaceAllUsesWith(n, *value);
    g.erase(n);
  }
}

} // namespace kiln
