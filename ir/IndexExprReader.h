// The grammar of symbolic integers in both text forms (graph sizes "f32[s0, 2*s1]" and loop
// index expressions), read from a shared Lexer so the two parsers cannot drift apart:
//   sum := product (('+' | '-') product)*;  product := unary ('*' unary)*;
//   unary := '-' unary | atom;
//   atom := int | name | floordiv(sum, sum) | mod(sum, sum) | min(sum, sum) | max(sum, sum)
//           | '(' sum ')'
#pragma once
#include <cstdint>
#include <string>

#include "ir/IndexExpr.h"
#include "ir/Lexer.h"

namespace kiln {

// The value of an integer token (digits only), negated when `negative`; throws IRError at the
// token when it does not fit in int64.
int64_t integerTokenValue(const Token& t, bool negative);

class IndexExprReader {
public:
  // `tok` is the parser's current token, `lex` its lexer; `what` names the expression in
  // messages ("size expression", "index expression").
  IndexExprReader(Lexer& lex, Token& tok, std::string what) : lex_(lex), tok_(tok), what_(std::move(what)) {}

  // Reads one expression starting at the current token, leaving `tok` at the token after it.
  // The result is canonical (built with IndexExpr's operators). Throws IRError on malformed
  // text, on more than 200 operators or nesting, on overflow and constant division by zero.
  IndexExpr read();

private:
  IndexExpr sum();
  IndexExpr product();
  IndexExpr unary();
  IndexExpr atom();
  void advance() { tok_ = lex_.next(); }
  bool is(Token::Kind k) const { return tok_.kind == k; }
  Token expect(Token::Kind k, const std::string& what);
  void countOperator();
  template <typename F>
  IndexExpr build(TextPos pos, F f);

  Lexer& lex_;
  Token& tok_;
  std::string what_;
  int operators_ = 0;
  int depth_ = 0;
};

} // namespace kiln
