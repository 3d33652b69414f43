// Recursive descent over the symbolic-integer grammar shared by the graph and loop parsers.
#include "ir/IndexExprReader.h"

#include "runtime/Error.h"
#include <cstdint>

namespace kiln {

namespace {

// Longer or deeper expressions are rejected rather than risking the stack or quadratic work.
constexpr int kMaxOperators = 200;
constexpr int kMaxDepth = 200;

using K = Token::Kind;

struct Depth {
  Depth(int& d, const Token& at) : d(d) {
    if (++d > kMaxDepth)
      throw IRError(at.pos, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  ~Depth() { --d; }
  int& d;
};

} // namespace

int64_t integerTokenValue(const Token& t, bool negative) {
  uint64_t v = 0;
  uint64_t limit = negative ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
  for (char c : t.text) {
    if (v > (limit - uint64_t(c - '0')) / 10)
      throw IRError(t.pos, "integer constant " + std::string(negative ? "-" : "") + t.text +
                               " does not fit in 64 bits");
    v = v * 10 + uint64_t(c - '0');
  }
  return negative ? int64_t(0 - v) : int64_t(v);
}

IndexExpr IndexExprReader::read() {
  operators_ = 0;
  return sum();
}

Token IndexExprReader::expect(K k, const std::string& what) {
  if (!is(k)) throw IRError(tok_.pos, "expected " + what + ", found " + describe(tok_));
  Token t = tok_;
  advance();
  return t;
}

void IndexExprReader::countOperator() {
  if (++operators_ > kMaxOperators)
    throw IRError(tok_.pos,
                  what_ + " with more than " + std::to_string(kMaxOperators) + " operators");
}

// IndexExpr's operators throw kiln::Error on overflow and constant division by zero; the
// message then points at the operator.
template <typename F>
IndexExpr IndexExprReader::build(TextPos pos, F f) {
  try {
    return f();
  } catch (const IRError&) {
    throw;
  } catch (const std::exception& e) {
    throw IRError(pos, e.what());
  }
}

IndexExpr IndexExprReader::sum() {
  Depth guard(depth_, tok_);
  IndexExpr v = product();
  while (is(K::Plus) || is(K::Minus)) {
    bool plus = is(K::Plus);
    TextPos pos = tok_.pos;
    countOperator();
    advance();
    IndexExpr r = product();
    v = build(pos, [&] { return plus ? v + r : v - r; });
  }
  return v;
}

IndexExpr IndexExprReader::product() {
  IndexExpr v = unary();
  while (is(K::Star)) {
    TextPos pos = tok_.pos;
    countOperator();
    advance();
    IndexExpr r = unary();
    v = build(pos, [&] { return v * r; });
  }
  return v;
}

IndexExpr IndexExprReader::unary() {
  Depth guard(depth_, tok_);
  if (!is(K::Minus)) return atom();
  TextPos pos = tok_.pos;
  advance();
  if (is(K::Integer)) {
    Token t = tok_;
    advance();
    return IndexExpr(integerTokenValue(t, true));
  }
  countOperator();
  IndexExpr inner = unary();
  return build(pos, [&] { return -inner; });
}

IndexExpr IndexExprReader::atom() {
  Token t = tok_;
  if (t.kind == K::Integer) {
    advance();
    return IndexExpr(integerTokenValue(t, false));
  }
  if (t.kind == K::LParen) {
    advance();
    IndexExpr v = sum();
    expect(K::RParen, "')'");
    return v;
  }
  if (t.kind != K::Identifier)
    throw IRError(t.pos, std::string("expected ") + (what_[0] == 'i' ? "an " : "a ") + what_ +
                             " (an integer, a symbol such as s0 or i0, floordiv(a, b), mod(a, b), "
                             "min(a, b) or max(a, b)), found " +
                             describe(t));
  advance();
  bool call = t.text == "floordiv" || t.text == "mod" || t.text == "min" || t.text == "max";
  if (call && is(K::LParen)) {
    countOperator();
    advance();
    IndexExpr a = sum();
    expect(K::Comma, "',' in " + t.text + "(a, b)");
    IndexExpr b = sum();
    expect(K::RParen, "')' closing " + t.text + "(a, b)");
    return build(t.pos, [&] {
      if (t.text == "floordiv") return floorDiv(a, b);
      if (t.text == "mod") return mod(a, b);
      return t.text == "min" ? min(a, b) : max(a, b);
    });
  }
  return build(t.pos, [&] { return IndexExpr::var(t.text); });
}

} // namespace kiln
