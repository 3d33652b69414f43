// Tokenizing graph text: positions, numbers, escaped strings, value names and dotted paths.
#include "ir/Lexer.h"

#include "ir/Identifier.h"

namespace kiln {

namespace {

bool isLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
int hexValue(char c) {
  if (isDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

} // namespace

std::string describe(const Token& t) {
  switch (t.kind) {
  case Token::Kind::End:
    return "end of input";
  case Token::Kind::Integer:
  case Token::Kind::Float:
    return "number " + t.text;
  case Token::Kind::String:
    return "a string";
  case Token::Kind::Value:
    return "%" + t.text;
  default: // identifiers, paths and punctuation hold their own text
    return "'" + t.text + "'";
  }
}

char Lexer::advance() {
  char c = text_[pos_++];
  if (c == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  return c;
}

void Lexer::skipSpaceAndComments() {
  while (pos_ < text_.size()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (pos_ < text_.size() && peek() != '\n')
        advance();
    } else {
      return;
    }
  }
}

Token Lexer::lexNumber(TextPos start) {
  std::string s;
  bool isFloat = false;
  while (isDigit(peek()))
    s += advance();
  if (peek() == '.' && isDigit(peek(1))) {
    isFloat = true;
    s += advance();
    while (isDigit(peek()))
      s += advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (isDigit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
    isFloat = true;
    s += advance();
    if (peek() == '+' || peek() == '-') s += advance();
    while (isDigit(peek()))
      s += advance();
  }
  if (isLetter(peek()))
    throw IRError(here(), "invalid number: '" + s + peek() + "...' (a letter right after digits)");
  return {isFloat ? Token::Kind::Float : Token::Kind::Integer, s, start};
}

Token Lexer::lexString(TextPos start) {
  advance(); // opening quote
  std::string s;
  while (true) {
    if (pos_ >= text_.size() || peek() == '\n')
      throw IRError(start, "unterminated string (missing closing '\"' on this line)");
    char c = advance();
    if (c == '"') return {Token::Kind::String, s, start};
    if (c != '\\') {
      s += c;
      continue;
    }
    TextPos escPos{line_, col_ - 1};
    char e = pos_ < text_.size() ? advance() : '\0';
    switch (e) {
    case '\\':
      s += '\\';
      break;
    case '"':
      s += '"';
      break;
    case 'n':
      s += '\n';
      break;
    case 't':
      s += '\t';
      break;
    case 'r':
      s += '\r';
      break;
    case 'x': {
      int hi = hexValue(peek()), lo = hexValue(peek(1));
      if (hi < 0 || lo < 0) throw IRError(escPos, "\\x escape needs two hex digits");
      advance();
      advance();
      s += char(hi * 16 + lo);
      break;
    }
    default:
      throw IRError(escPos, std::string("unknown escape sequence '\\") +
                                (e ? std::string(1, e) : "") +
                                "' (use \\\\, \\\", \\n, \\t, \\r or \\xNN)");
    }
  }
}

Token Lexer::next() {
  skipSpaceAndComments();
  TextPos start = here();
  if (pos_ >= text_.size()) return {Token::Kind::End, "", start};
  char c = peek();
  if (isLetter(c)) {
    std::string s;
    while (isNameChar(peek()))
      s += advance();
    return {Token::Kind::Identifier, s, start};
  }
  if (isDigit(c)) return lexNumber(start);
  if (c == '"') return lexString(start);
  if (c == '%') {
    advance();
    std::string s;
    while (isNameChar(peek()))
      s += advance();
    if (s.empty()) throw IRError(start, "expected a value name after '%'");
    return {Token::Kind::Value, s, start};
  }
  if (c == '.' && peek(1) == '.' && peek(2) == '.') {
    advance();
    advance();
    advance();
    return {Token::Kind::Ellipsis, "...", start};
  }
  static constexpr std::pair<char, Token::Kind> punct[] = {
      {'(', Token::Kind::LParen},   {')', Token::Kind::RParen}, {'[', Token::Kind::LBracket},
      {']', Token::Kind::RBracket}, {'{', Token::Kind::LBrace}, {'}', Token::Kind::RBrace},
      {',', Token::Kind::Comma},    {':', Token::Kind::Colon},  {'=', Token::Kind::Equal},
      {'*', Token::Kind::Star},     {'+', Token::Kind::Plus},   {'-', Token::Kind::Minus},
      {'@', Token::Kind::At}};
  for (auto [ch, kind] : punct) {
    if (c == ch) {
      advance();
      return {kind, std::string(1, c), start};
    }
  }
  std::string shown = (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f
                          ? std::string("'") + c + "'"
                          : "byte " + std::to_string(int((unsigned char)c));
  throw IRError(start, "unexpected character " + shown);
}

Token Lexer::nextPath() {
  skipSpaceAndComments();
  TextPos start = here();
  if (peek() == '"') return lexString(start);
  std::string s;
  while (true) {
    size_t segStart = s.size();
    while (isNameChar(peek()))
      s += advance();
    if (s.size() == segStart) {
      if (s.empty()) return next(); // not a path: let the caller report what is there
      throw IRError(here(), "expected a name after '.' in '" + s + "'");
    }
    if (peek() != '.') break;
    s += advance();
  }
  return {Token::Kind::Path, s, start};
}

} // namespace kiln
