// Recursive-descent parser of the graph text form: graphs, nodes, arguments, types, locations.
#include "ir/Parser.h"

#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <unordered_set>
#include <utility>

#include "ir/IndexExprReader.h"
#include "ir/Lexer.h"
#include "ir/OpTarget.h"
#include "ir/TextParser.h"

namespace kiln {

namespace {

class Parser : public TextParser {
public:
  using TextParser::TextParser;

  std::vector<Graph> parseAll() {
    advance();
    std::vector<Graph> graphs;
    std::unordered_set<std::string> names;
    while (!is(K::End)) {
      TextPos pos = tok_.pos;
      graphs.push_back(parseGraph());
      if (!names.insert(graphs.back().name()).second)
        fail(pos, "redefinition of graph @" + graphs.back().name());
    }
    return graphs;
  }

  // A whole text that is one type and nothing else.
  Type parseTypeOnly() {
    return parseWhole([&] { return parseType(); }, "type");
  }

private:

  Graph parseGraph() {
    TextPos pos = tok_.pos;
    expectKeyword("graph");
    expect(K::At, "'@' and the graph's name");
    if (!is(K::Identifier) && !is(K::String))
      fail(tok_.pos, "expected the graph's name after '@', found " + describe(tok_));
    Graph g(tok_.text);
    g.parsedAt = pos;
    graph_ = &g;
    advance();
    expect(K::LParen, "'(' starting the parameter list");
    while (!is(K::RParen)) {
      parseParameter();
      if (!is(K::RParen)) expect(K::Comma, "',' or ')' in the parameter list");
    }
    advance();
    expect(K::LBrace, "'{' starting the graph body");
    while (!is(K::RBrace)) {
      if (is(K::End))
        fail(tok_.pos, "unexpected end of input: graph @" + g.name() + " has no closing '}'");
      parseStatement();
    }
    advance();
    if (std::optional<PendingUse> use = std::exchange(pendingUse_, std::nullopt)) {
      if (Node* later = g.findNode(use->name))
        fail(use->pos, "use of %" + use->name + " before its definition (line " +
                           std::to_string(later->parsedAt.line) + ")");
      fail(use->pos, "use of undefined value %" + use->name);
    }
    graph_ = nullptr;
    return g;
  }

  void checkNewName(const Token& t) {
    if (Node* old = graph_->findNode(t.text))
      fail(t.pos, "redefinition of %" + t.text + " (first defined at line " +
                      std::to_string(old->parsedAt.line) + ")");
  }

  void parseParameter() {
    Token name = expect(K::Value, "a parameter '%name'");
    checkNewName(name);
    NodeMeta meta;
    if (is(K::Colon)) {
      advance();
      meta.type = parseType();
    }
    if (isKeyword("loc")) meta.loc = parseLoc();
    Node* n = graph_->placeholder(name.text);
    n->meta = std::move(meta);
    n->parsedAt = name.pos;
  }

  void parseStatement() {
    if (isKeyword("output")) {
      TextPos pos = tok_.pos;
      advance();
      Argument result = parseArgument();
      finishNode(graph_->create(Opcode::Output, "output", {std::move(result)}), pos);
      return;
    }
    Token name = expect(K::Value, "a node definition '%name = ...' or 'output'");
    checkNewName(name);
    expect(K::Equal, "'=' after %" + name.text);
    if (!is(K::Identifier)) fail(tok_.pos, "expected an opcode, found " + describe(tok_));
    auto opcode = opcodeFromName(tok_.text);
    if (!opcode || *opcode == Opcode::Output)
      fail(tok_.pos, "unknown opcode '" + tok_.text +
                         "'; expected get_attr, call_function, call_method or call_module");
    if (*opcode == Opcode::Placeholder)
      fail(tok_.pos, "placeholders are declared in the graph's parameter list, not in its body");
    TextPos afterOpcode{tok_.pos.line, tok_.pos.col + int(tok_.text.size())};
    Token target = lex_.nextPath();
    tok_ = target;
    if (target.pos.line != afterOpcode.line)
      fail(afterOpcode,
           std::string("expected the target of ") + opcodeName(*opcode) + " on the same line");
    if (!is(K::Path) && !is(K::String))
      fail(tok_.pos, std::string("expected the target of ") + opcodeName(*opcode) + ", found " +
                         describe(tok_));
    if (*opcode == Opcode::CallFunction && isOpTarget(target.text) &&
        resolveOpTarget(target.text) == OpId::NumOps)
      fail(target.pos, unknownOpMessage(target.text));
    advance();
    std::vector<Argument> args;
    Kwargs kwargs;
    if (*opcode != Opcode::GetAttr) {
      expect(K::LParen, std::string("'(' after the target of ") + opcodeName(*opcode));
      parseCallArguments(args, kwargs);
    } else if (is(K::LParen)) {
      fail(tok_.pos, "get_attr takes no arguments");
    }
    finishNode(graph_->create(*opcode, target.text, std::move(args), std::move(kwargs), name.text),
               name.pos);
  }

  void finishNode(Node* n, TextPos pos) {
    n->parsedAt = pos;
    if (is(K::Colon)) {
      advance();
      n->meta.type = parseType();
    }
    if (isKeyword("loc")) n->meta.loc = parseLoc();
  }

  // After '(': positional arguments, then name=value keyword arguments, then ')'.
  void parseCallArguments(std::vector<Argument>& args, Kwargs& kwargs) {
    while (!is(K::RParen)) {
      if (is(K::Identifier) && peekNext().kind == K::Equal) {
        Token key = tok_;
        advance();
        advance();
        for (const auto& kv : kwargs)
          if (kv.first == key.text) fail(key.pos, "duplicate keyword argument '" + key.text + "'");
        kwargs.emplace_back(key.text, parseArgument());
      } else {
        if (!kwargs.empty()) fail(tok_.pos, "positional argument after keyword arguments");
        args.push_back(parseArgument());
      }
      if (!is(K::RParen)) expect(K::Comma, "',' or ')' in the argument list");
    }
    advance();
  }

  // Items up to `close` (already past the opening token); a trailing comma is allowed.
  std::vector<Argument> parseItems(K close, const char* what, bool* sawComma = nullptr) {
    std::vector<Argument> items;
    while (!is(close)) {
      items.push_back(parseArgument());
      if (is(close)) break;
      expect(K::Comma, std::string("',' or the end of the ") + what);
      if (sawComma) *sawComma = true;
    }
    advance();
    return items;
  }

  Argument parseArgument() {
    DepthGuard guard(*this);
    Token t = tok_;
    switch (t.kind) {
    case K::Value: {
      advance();
      if (Node* n = graph_->findNode(t.text)) return Argument(n);
      if (!pendingUse_) pendingUse_ = PendingUse{t.text, t.pos};
      return Argument();
    }
    case K::Integer:
      advance();
      return Argument(parseInt(t, false));
    case K::Float:
      advance();
      return Argument(parseFloat(t));
    case K::Minus: {
      advance();
      Token num = tok_;
      advance();
      if (num.kind == K::Integer) return Argument(parseInt(num, true));
      if (num.kind == K::Float) return Argument(-parseFloat(num));
      if (num.kind == K::Identifier && num.text == "inf") return Argument(-INFINITY);
      fail(num.pos, "expected a number after '-', found " + describe(num));
    }
    case K::String:
      advance();
      return Argument(t.text);
    case K::Ellipsis:
      advance();
      return Argument::ellipsis();
    case K::LBracket:
      advance();
      return Argument::list(parseItems(K::RBracket, "list"));
    case K::LParen: {
      advance();
      bool sawComma = false;
      std::vector<Argument> items = parseItems(K::RParen, "tuple", &sawComma);
      if (items.size() == 1 && !sawComma)
        fail(t.pos, "a one-element tuple needs a trailing comma: (x,)");
      return Argument::tuple(std::move(items));
    }
    case K::LBrace:
      return parseDict();
    case K::Identifier:
      return parseNamedConstant();
    default:
      fail(t.pos, "expected an argument, found " + describe(t));
    }
  }

  Argument parseDict() {
    advance();
    std::vector<std::pair<std::string, Argument>> entries;
    while (!is(K::RBrace)) {
      Token key = expect(K::String, "a string key in the dict");
      for (const auto& e : entries)
        if (e.first == key.text) fail(key.pos, "duplicate dict key \"" + key.text + "\"");
      expect(K::Colon, "':' after the dict key");
      entries.emplace_back(key.text, parseArgument());
      if (!is(K::RBrace)) expect(K::Comma, "',' or '}' in the dict");
    }
    advance();
    return Argument::dict(std::move(entries));
  }

  Argument parseNamedConstant() {
    Token t = tok_;
    advance();
    const std::string& w = t.text;
    if (w == "None") return Argument();
    if (w == "True") return Argument(true);
    if (w == "False") return Argument(false);
    if (w == "inf") return Argument(INFINITY);
    if (w == "nan") return Argument(NAN);
    if (auto dtype = dtypeFromShortName(w)) return Argument(*dtype);
    if (w == "device") {
      expect(K::LParen, "'(' after device");
      Token text = expect(K::String, "a device string such as \"cuda:0\"");
      expect(K::RParen, "')' closing device(...)");
      return Argument(parseDevice(text));
    }
    if (w == "slice") {
      expect(K::LParen, "'(' after slice");
      Argument start = parseArgument();
      expect(K::Comma, "',' in slice(start, stop, step)");
      Argument stop = parseArgument();
      expect(K::Comma, "',' in slice(start, stop, step)");
      Argument step = parseArgument();
      expect(K::RParen, "')' closing slice(start, stop, step)");
      return Argument::slice(std::move(start), std::move(stop), std::move(step));
    }
    fail(t.pos, "unknown constant '" + w +
                    "' (expected None, True, False, inf, nan, a dtype, device(...) or slice(...))");
  }

  int64_t parseInt(const Token& t, bool negative) { return integerTokenValue(t, negative); }

  double parseFloat(const Token& t) {
    double d = std::strtod(t.text.c_str(), nullptr);
    if (std::isinf(d)) fail(t.pos, "float constant " + t.text + " is out of range (write inf)");
    return d;
  }

  Device parseDevice(const Token& t) {
    const std::string& s = t.text;
    size_t colon = s.find(':');
    std::string kind = s.substr(0, colon);
    if (kind != "cpu" && kind != "cuda" && kind != "meta")
      fail(t.pos, "unknown device '" + s + "' (expected cpu, meta, cuda or cuda:N)");
    if (colon == std::string::npos) return Device::parse(s);
    std::string index = s.substr(colon + 1);
    if (index.empty() || index.size() > 3 ||
        index.find_first_not_of("0123456789") != std::string::npos || std::stoi(index) > 127)
      fail(t.pos, "bad device index in '" + s + "' (expected 0 to 127)");
    return Device::parse(s);
  }

  Type parseType() {
    DepthGuard guard(*this);
    Token t = tok_;
    if (t.kind == K::LParen) {
      advance();
      std::vector<Type> elems;
      bool sawComma = false;
      while (!is(K::RParen)) {
        elems.push_back(parseType());
        if (is(K::RParen)) break;
        expect(K::Comma, "',' or ')' in the tuple type");
        sawComma = true;
      }
      advance();
      if (elems.size() == 1 && !sawComma)
        fail(t.pos, "a one-element tuple type needs a trailing comma: (f32[2],)");
      return Type::tuple(std::move(elems));
    }
    if (t.kind != K::Identifier) fail(t.pos, "expected a type, found " + describe(t));
    advance();
    if (t.text == "int") return Type::number(Type::Kind::Int);
    if (t.text == "float") return Type::number(Type::Kind::Float);
    if (t.text == "bool") return Type::number(Type::Kind::Bool);
    auto dtype = dtypeFromShortName(t.text);
    if (!dtype)
      fail(t.pos, "unknown type '" + t.text +
                      "' (expected a dtype b8 u8 i8 i16 i32 i64 f16 bf16 f32 f64, int, float, bool "
                      "or a tuple of types)");
    TensorType tt;
    tt.dtype = *dtype;
    expect(K::LBracket, "'[' and the sizes after the dtype");
    tt.sizes = parseDims();
    if (is(K::LBrace)) parseTensorAttributes(tt);
    return Type(std::move(tt));
  }

  // After '[': comma-separated symbolic integers, then ']'.
  std::vector<IndexExpr> parseDims() {
    std::vector<IndexExpr> dims;
    while (!is(K::RBracket)) {
      dims.push_back(parseSymExpr());
      if (!is(K::RBracket)) expect(K::Comma, "',' or ']' in the sizes");
    }
    advance();
    return dims;
  }

  void parseTensorAttributes(TensorType& tt) {
    advance();
    bool sawStrides = false, sawDevice = false;
    while (!is(K::RBrace)) {
      Token key = expect(K::Identifier, "'strides' or 'device'");
      expect(K::Equal, "'=' after " + key.text);
      if (key.text == "strides" && !sawStrides) {
        sawStrides = true;
        expect(K::LBracket, "'[' starting the strides");
        tt.strides = parseDims();
        if (tt.strides->size() != tt.sizes.size())
          fail(key.pos, "strides have " + std::to_string(tt.strides->size()) +
                            " entries but the type has " + std::to_string(tt.sizes.size()) +
                            " dims");
      } else if (key.text == "device" && !sawDevice) {
        sawDevice = true;
        Token kind = expect(K::Identifier, "a device (cpu, meta, cuda, cuda:N)");
        std::string text = kind.text;
        if (is(K::Colon)) {
          advance();
          text += ":" + expect(K::Integer, "a device index").text;
        }
        tt.device = parseDevice(Token{K::String, text, kind.pos});
      } else {
        fail(key.pos,
             (sawStrides && key.text == "strides") || (sawDevice && key.text == "device")
                 ? "duplicate tensor attribute '" + key.text + "'"
                 : "unknown tensor attribute '" + key.text + "' (expected strides or device)");
      }
      if (!is(K::RBrace)) expect(K::Comma, "',' or '}' in the tensor attributes");
    }
    advance();
  }

  IndexExpr parseSymExpr() { return IndexExprReader(lex_, tok_, "size expression").read(); }

  SourceLoc parseLoc() {
    advance();
    expect(K::LParen, "'(' after loc");
    SourceLoc loc;
    loc.file = expect(K::String, "the file name (a string) in loc(\"file\":line:function)").text;
    expect(K::Colon, "':' after the file name in loc(...)");
    Token line = expect(K::Integer, "a line number in loc(...)");
    int64_t l = parseInt(line, false);
    if (l > INT32_MAX) fail(line.pos, "line number " + line.text + " is too large");
    loc.line = int(l);
    expect(K::Colon, "':' after the line number in loc(...)");
    if (!is(K::Identifier) && !is(K::String))
      fail(tok_.pos, "expected the function name in loc(...), found " + describe(tok_));
    loc.function = tok_.text;
    advance();
    expect(K::RParen, "')' closing loc(...)");
    return loc;
  }

  Graph* graph_ = nullptr;
};

} // namespace

ParseResult parseGraphs(std::string_view text, int firstLine) {
  Parser p(text, firstLine);
  ParseResult r;
  r.error = p.firstErrorOf([&] { r.graphs = p.parseAll(); });
  return r;
}

Graph parseGraph(std::string_view text) {
  ParseResult r = parseGraphs(text);
  if (r.error) throw IRError(*r.error);
  if (r.graphs.size() != 1)
    throw IRError(TextPos{1, 1},
                  "expected exactly one graph, found " + std::to_string(r.graphs.size()));
  return std::move(r.graphs.front());
}

Type parseType(std::string_view text) {
  Parser p(text, 1);
  return parseOnly<Type>(p, [&] { return p.parseTypeOnly(); });
}

} // namespace kiln
