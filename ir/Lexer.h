// The tokenizer of the graph text form: identifiers, numbers, strings, %values and punctuation,
// with 1-based line/column positions. Comments run from "//" to the end of the line.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "ir/Diagnostic.h"

namespace kiln {

struct Token {
  enum class Kind : uint8_t {
    End,
    Identifier,
    Integer,
    Float,
    String,
    Value, // Value: %name (text holds the name)
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    Equal,
    Star,
    Plus,
    Minus,
    At,
    Ellipsis,
    Path, // a dotted path, only from Lexer::nextPath
  };
  Kind kind = Kind::End;
  std::string text; // identifier, digits, decoded string contents, value name or path
  TextPos pos;
};

// "identifier", "'('", ... for "expected X, found Y" messages.
std::string describe(const Token& t);

class Lexer {
public:
  Lexer(std::string_view text, int firstLine = 1) : text_(text), line_(firstLine) {}

  // The next token; throws IRError on an unterminated string, a bad escape or a stray character.
  Token next();
  // The next token read as a target: a dotted path of identifiers and integers
  // ("layers.0.weight", "aten.add.Tensor") or a quoted string.
  Token nextPath();

private:
  void skipSpaceAndComments();
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  char advance();
  TextPos here() const { return {line_, col_}; }
  Token lexNumber(TextPos start);
  Token lexString(TextPos start);

  std::string_view text_;
  size_t pos_ = 0;
  int line_;
  int col_ = 1;
};

} // namespace kiln
