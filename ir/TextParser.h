// What the recursive-descent parsers of the text forms share (graphs: ir/Parser.cpp, loop
// programs: ir/loop/Parser.cpp): the token cursor, "expected X, found Y" errors, the nesting
// limit, and the use of a name not yet defined, which is reported first in text order.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ir/Diagnostic.h"
#include "ir/Lexer.h"

namespace kiln {

class TextParser {
public:
  TextParser(std::string_view text, int firstLine) : lex_(text, firstLine) {}

  // The first error in text order: a use of an undefined value seen earlier wins.
  Diagnostic firstError(const IRError& e) const {
    if (pendingUse_) return {pendingUse_->pos, "use of undefined value %" + pendingUse_->name};
    return e.diagnostic();
  }
  TextPos position() const { return tok_.pos; }

  // Runs `parse`; its error, if any, comes back as the diagnostic of the first error in text
  // order, placed at the current token where the error itself has no position.
  template <typename F>
  std::optional<Diagnostic> firstErrorOf(F&& parse) {
    try {
      parse();
      return std::nullopt;
    } catch (const IRError& e) {
      Diagnostic d = firstError(e);
      if (!d.pos.known()) d.pos = position();
      return d;
    } catch (const std::exception& e) {
      return Diagnostic{position(), e.what()};
    }
  }

protected:
  using K = Token::Kind;

  // Deeper nesting than this is rejected rather than risking the stack (size and index
  // expressions have their own limits, ir/IndexExprReader.h).
  static constexpr int kMaxDepth = 200;

  struct DepthGuard {
    explicit DepthGuard(TextParser& p) : p(p) {
      if (++p.depth_ > kMaxDepth)
        p.fail(p.tok_.pos, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
    TextParser& p;
  };
  struct PendingUse {
    std::string name;
    TextPos pos;
  };

  [[noreturn]] void fail(TextPos pos, std::string msg) { throw IRError(pos, std::move(msg)); }
  void advance() { tok_ = lex_.next(); }
  bool is(K k) const { return tok_.kind == k; }
  bool isKeyword(const char* word) const { return is(K::Identifier) && tok_.text == word; }
  Token peekNext() const {
    Lexer copy = lex_;
    return copy.next();
  }
  Token expect(K k, const std::string& what) {
    if (!is(k)) fail(tok_.pos, "expected " + what + ", found " + describe(tok_));
    Token t = tok_;
    advance();
    return t;
  }
  void expectKeyword(const char* word, const std::string& context = "") {
    if (!isKeyword(word))
      fail(tok_.pos, std::string("expected '") + word + "'" + context + ", found " + describe(tok_));
    advance();
  }
  // Parses the one thing `parse` reads and checks that nothing follows it.
  template <typename F>
  auto parseWhole(F&& parse, const char* what) {
    advance();
    auto result = parse();
    if (!is(K::End)) fail(tok_.pos, "unexpected " + describe(tok_) + " after the " + what);
    return result;
  }

  Lexer lex_;
  Token tok_;
  int depth_ = 0;
  std::optional<PendingUse> pendingUse_;
};

// Parses a whole text that is one `T` (a type, an index expression), throwing IRError.
template <typename T, typename Parser, typename F>
T parseOnly(Parser& p, F&& parse) {
  std::optional<T> result;
  if (std::optional<Diagnostic> d = p.firstErrorOf([&] { result.emplace(parse()); })) throw IRError(*d);
  return std::move(*result);
}

} // namespace kiln
