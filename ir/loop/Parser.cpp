// Recursive-descent parser of the loop program text form: programs, inputs, buffers, kernels,
// loop bodies and index expressions. Shares the graph text form's lexer and diagnostics.
#include "ir/loop/Parser.h"

#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <utility>

#include "ir/IndexExprReader.h"
#include "ir/Lexer.h"
#include "ir/TextParser.h"
#include "ir/Type.h"

namespace kiln {

namespace {

class LoopParser : public TextParser {
public:
  using TextParser::TextParser;

  std::vector<LoopProgram> parseAll() {
    advance();
    std::vector<LoopProgram> programs;
    std::unordered_map<std::string, int> names;
    while (!is(K::End)) {
      TextPos pos = tok_.pos;
      programs.push_back(parseProgram());
      auto [it, fresh] = names.emplace(programs.back().name, pos.line);
      if (!fresh)
        fail(pos, "redefinition of program @" + programs.back().name + " (first defined at line " +
                      std::to_string(it->second) + ")");
    }
    return programs;
  }

  IndexExpr parseExprOnly() {
    return parseWhole([&] { return parseExpr(); }, "expression");
  }

private:
  struct Definition {
    ScalarType dtype;
    int line;
  };


  LoopProgram parseProgram() {
    LoopProgram p;
    p.parsedAt = tok_.pos;
    expectKeyword("program");
    expect(K::At, "'@' and the program's name");
    if (!is(K::Identifier) && !is(K::String))
      fail(tok_.pos, "expected the program's name after '@', found " + describe(tok_));
    p.name = tok_.text;
    program_ = &p;
    defs_.clear();
    kernels_.clear();
    advance();
    expect(K::LParen, "'(' starting the input list");
    while (!is(K::RParen)) {
      parseInput();
      if (!is(K::RParen)) expect(K::Comma, "',' or ')' in the input list");
    }
    advance();
    expect(K::LBrace, "'{' starting the program body");
    bool sawOutput = false;
    while (!is(K::RBrace)) {
      if (is(K::End))
        fail(tok_.pos, "unexpected end of input: program @" + p.name + " has no closing '}'");
      if (sawOutput) fail(tok_.pos, "output must be the last statement of a program");
      if (isKeyword("output")) {
        parseOutput();
        sawOutput = true;
      } else if (isKeyword("kernel")) {
        parseKernel();
      } else {
        parseBuffer("");
      }
    }
    if (!sawOutput) fail(tok_.pos, "program @" + p.name + " has no output statement");
    advance();
    checkPendingUse();
    program_ = nullptr;
    return p;
  }

  // A name used before its definition is reported once the program is read, so the message
  // can say whether (and where) it is defined later.
  void checkPendingUse() {
    std::optional<PendingUse> use = std::exchange(pendingUse_, std::nullopt);
    if (!use) return;
    auto it = defs_.find(use->name);
    if (it != defs_.end())
      fail(use->pos, "use of %" + use->name + " before its definition (line " +
                         std::to_string(it->second.line) + ")");
    fail(use->pos, "use of undefined value %" + use->name);
  }

  void define(const Token& name, ScalarType dtype) {
    auto [it, fresh] = defs_.emplace(name.text, Definition{dtype, name.pos.line});
    if (!fresh)
      fail(name.pos, "redefinition of %" + name.text + " (first defined at line " +
                         std::to_string(it->second.line) + ")");
  }

  // A buffer or input named by a load, an extern or the output; unknown ones are remembered.
  ScalarType use(const Token& name) {
    auto it = defs_.find(name.text);
    if (it != defs_.end()) return it->second.dtype;
    if (!pendingUse_) pendingUse_ = PendingUse{name.text, name.pos};
    return ScalarType::Float32;
  }

  void parseInput() {
    Token name = expect(K::Value, "an input '%name: dtype[sizes]'");
    expect(K::Colon, "':' and the input's type");
    LoopInput in;
    in.name = name.text;
    in.parsedAt = name.pos;
    in.dtype = parseDtype();
    in.sizes = parseSizes();
    if (is(K::LBrace)) {
      advance();
      Token key = expect(K::Identifier, "'strides'");
      if (key.text != "strides")
        fail(key.pos, "unknown input attribute '" + key.text + "' (expected strides)");
      expect(K::Equal, "'=' after strides");
      in.strides = parseSizes();
      if (in.strides.size() != in.sizes.size())
        fail(key.pos, "strides have " + std::to_string(in.strides.size()) +
                          " entries but the input has " + std::to_string(in.sizes.size()) +
                          " dims");
      expect(K::RBrace, "'}' closing the input attributes");
    } else {
      in.strides = contiguousStrides(in.sizes);
    }
    define(name, in.dtype);
    program_->inputs.push_back(std::move(in));
  }

  ScalarType parseDtype() {
    Token t = tok_;
    if (t.kind == K::Identifier)
      if (std::optional<ScalarType> d = dtypeFromShortName(t.text)) {
        advance();
        return *d;
      }
    fail(t.pos, "expected a dtype (b8, u8, i8, i16, i32, i64, f16, bf16, f32, f64), found " +
                    describe(t));
  }

  std::vector<IndexExpr> parseSizes() {
    expect(K::LBracket, "'[' starting the sizes");
    std::vector<IndexExpr> sizes;
    while (!is(K::RBracket)) {
      sizes.push_back(parseExpr());
      if (!is(K::RBracket)) expect(K::Comma, "',' or ']' in the sizes");
    }
    advance();
    return sizes;
  }

  void parseOutput() {
    advance();
    if (!is(K::Value)) return;
    while (true) {
      Token name = expect(K::Value, "an output '%name'");
      use(name);
      program_->outputs.push_back(name.text);
      if (!is(K::Comma)) break;
      advance();
    }
  }

  void parseKernel() {
    advance();
    expect(K::At, "'@' and the kernel's name");
    Token name = expect(K::Identifier, "the kernel's name");
    auto [it, fresh] = kernels_.emplace(name.text, name.pos.line);
    if (!fresh)
      fail(name.pos, "redefinition of kernel @" + name.text + " (first defined at line " +
                         std::to_string(it->second) + ")");
    expect(K::LBrace, "'{' starting the kernel");
    if (is(K::RBrace)) fail(tok_.pos, "kernel @" + name.text + " has no buffers");
    while (!is(K::RBrace)) {
      if (is(K::End))
        fail(tok_.pos, "unexpected end of input: kernel @" + name.text + " has no closing '}'");
      parseBuffer(name.text);
    }
    advance();
  }

  void parseBuffer(const std::string& kernel) {
    Token name = expect(K::Value, "a buffer definition '%name: dtype[sizes] = ...', 'kernel' "
                                  "or 'output'");
    expect(K::Colon, "':' and the buffer's type");
    Buffer b;
    b.name = name.text;
    b.parsedAt = name.pos;
    b.kernel = kernel;
    b.dtype = parseDtype();
    b.sizes = parseSizes();
    if (is(K::LBrace)) {
      advance();
      Token key = expect(K::Identifier, "'reuses'");
      if (key.text != "reuses")
        fail(key.pos, "unknown buffer attribute '" + key.text + "' (expected reuses)");
      expect(K::Equal, "'=' after reuses");
      Token reused = expect(K::Value, "the buffer whose storage is reused '%name'");
      use(reused);
      b.reuses = reused.text;
      expect(K::RBrace, "'}' closing the buffer attributes");
    }
    expect(K::Equal, "'=' after the buffer's type");
    if (isKeyword("pointwise")) {
      advance();
      Pointwise pw;
      pw.ranges = parseRanges();
      if (isKeyword("into")) {
        advance();
        Token base = expect(K::Value, "the buffer or input written in place after 'into'");
        use(base);
        pw.into = base.text;
        expect(K::LBracket, "'[' and the index written");
        pw.intoIndex = parseExpr();
        expect(K::RBracket, "']' closing the index written");
        if (isKeyword("accumulate")) {
          advance();
          pw.accumulate = true;
        }
      }
      pw.body = parseBody();
      b.computation = std::move(pw);
    } else if (isKeyword("reduction")) {
      advance();
      Reduction red;
      Token kind = expect(K::Identifier, "a reduction kind");
      std::optional<ReductionKind> k = reductionKindFromName(kind.text);
      if (!k)
        fail(kind.pos, "unknown reduction kind '" + kind.text +
                           "' (expected sum, prod, max, min, argmax, argmin, any, all, "
                           "welford_mean or welford_var)");
      red.kind = *k;
      red.ranges = parseRanges();
      expectKeyword("over", " and the reduction ranges");
      red.reductionRanges = parseRanges();
      red.body = parseBody();
      b.computation = std::move(red);
    } else if (isKeyword("extern")) {
      advance();
      b.computation = parseExtern();
    } else {
      fail(tok_.pos, "expected pointwise, reduction or extern, found " + describe(tok_));
    }
    define(name, b.dtype);
    program_->buffers.push_back(std::move(b));
  }

  std::vector<IterVar> parseRanges() {
    expect(K::LBracket, "'[' starting the ranges");
    std::vector<IterVar> ranges;
    while (!is(K::RBracket)) {
      Token name = expect(K::Identifier, "a loop variable 'name: extent'");
      expect(K::Colon, "':' after the loop variable " + name.text);
      ranges.push_back({name.text, parseExpr()});
      if (!is(K::RBracket)) expect(K::Comma, "',' or ']' in the ranges");
    }
    advance();
    return ranges;
  }

  Extern parseExtern() {
    Extern ext;
    ext.kernel = expect(K::Identifier, "the extern kernel's name").text;
    expect(K::LParen, "'(' after the extern kernel's name");
    while (!is(K::RParen)) {
      if (is(K::Value)) {
        if (!ext.args.empty())
          fail(tok_.pos, "extern inputs come before the keyword arguments");
        use(tok_);
        ext.inputs.push_back(tok_.text);
        advance();
        if (isKeyword("view")) {
          advance();
          ext.views.resize(ext.inputs.size());
          ext.views.back() = parseStridedView();
        }
      } else {
        Token key = expect(K::Identifier, "an input '%name' or a keyword argument 'name=value'");
        for (const auto& kv : ext.args)
          if (kv.first == key.text) fail(key.pos, "duplicate keyword argument '" + key.text + "'");
        expect(K::Equal, "'=' after " + key.text);
        ext.args.emplace_back(key.text, parseExternArg());
      }
      if (!is(K::RParen)) expect(K::Comma, "',' or ')' in the extern arguments");
    }
    advance();
    if (!ext.views.empty()) ext.views.resize(ext.inputs.size());
    return ext;
  }

  // `view([sizes], [strides], offset)` after an extern input, from the '('.
  StridedView parseStridedView() {
    expect(K::LParen, "'(' after view");
    StridedView v;
    v.sizes = parseSizes();
    expect(K::Comma, "',' after the view's sizes");
    v.strides = parseSizes();
    expect(K::Comma, "',' after the view's strides");
    v.offset = parseSignedInt();
    expect(K::RParen, "')' after the view's offset");
    return v;
  }

  ExternArg parseExternArg() {
    if (isKeyword("True") || isKeyword("False")) {
      bool v = tok_.text == "True";
      advance();
      return v;
    }
    if (is(K::LBracket)) {
      advance();
      std::vector<int64_t> list;
      while (!is(K::RBracket)) {
        list.push_back(parseSignedInt());
        if (!is(K::RBracket)) expect(K::Comma, "',' or ']' in the list");
      }
      advance();
      return list;
    }
    std::variant<int64_t, double> n = parseNumber("a keyword argument value (an int, a float, "
                                                  "True, False or a list of ints)");
    if (auto* i = std::get_if<int64_t>(&n)) return *i;
    return std::get<double>(n);
  }

  int64_t parseSignedInt() {
    bool negative = is(K::Minus);
    if (negative) advance();
    return parseInt(expect(K::Integer, "an integer"), negative);
  }

  int64_t parseInt(const Token& t, bool negative) { return integerTokenValue(t, negative); }

  // An int or a float, optionally negated; inf and nan are floats.
  std::variant<int64_t, double> parseNumber(const std::string& what) {
    bool negative = is(K::Minus);
    if (negative) advance();
    Token t = tok_;
    if (t.kind == K::Integer) {
      advance();
      return parseInt(t, negative);
    }
    if (t.kind == K::Float) {
      advance();
      double d = std::strtod(t.text.c_str(), nullptr);
      if (std::isinf(d)) fail(t.pos, "float constant " + t.text + " is out of range (write inf)");
      return negative ? -d : d;
    }
    if (t.kind == K::Identifier && (t.text == "inf" || (t.text == "nan" && !negative))) {
      advance();
      double d = t.text == "inf" ? INFINITY : NAN;
      return negative ? -d : d;
    }
    fail(t.pos, "expected " + what + ", found " + describe(t));
  }

  LoopBody parseBody() {
    expect(K::LBrace, "'{' starting the loop body");
    LoopBody body;
    std::unordered_map<std::string, std::pair<int, int>> values; // name -> (op, line)
    while (!is(K::RBrace)) {
      if (is(K::End)) fail(tok_.pos, "unexpected end of input: loop body has no closing '}'");
      LoopOp op;
      op.parsedAt = tok_.pos;
      std::optional<Token> name;
      if (is(K::Value)) {
        name = tok_;
        advance();
        expect(K::Equal, "'=' after %" + name->text);
      }
      Token opName = expect(K::Identifier, "a loop body op ('%name = op ...', store or reduce)");
      std::optional<LoopOpCode> code = loopOpFromName(opName.text);
      if (!code) fail(opName.pos, "unknown loop op '" + opName.text + "'");
      op.code = *code;
      if (name && !definesValue(op.code))
        fail(opName.pos, std::string(loopOpName(op.code)) + " defines no value");
      if (!name && definesValue(op.code))
        fail(opName.pos, std::string("expected '%name = ' before ") + loopOpName(op.code));
      parseOpOperands(op, body, values);
      if (name) {
        auto [it, fresh] =
            values.emplace(name->text, std::make_pair(int(body.ops.size()), name->pos.line));
        if (!fresh)
          fail(name->pos, "redefinition of %" + name->text + " (first defined at line " +
                              std::to_string(it->second.second) + ")");
      }
      body.ops.push_back(std::move(op));
    }
    advance();
    return body;
  }

  void parseOpOperands(LoopOp& op, const LoopBody& body,
                       const std::unordered_map<std::string, std::pair<int, int>>& values) {
    switch (op.code) {
    case LoopOpCode::Load: {
      Token buf = expect(K::Value, "the buffer to load from");
      op.buffer = buf.text;
      op.dtype = use(buf);
      expect(K::LBracket, "'[' and the index");
      op.index = parseExpr();
      expect(K::RBracket, "']' closing the index");
      return;
    }
    case LoopOpCode::Constant: {
      TextPos pos = tok_.pos;
      std::variant<int64_t, double, bool> v = int64_t(0);
      if (isKeyword("True") || isKeyword("False")) {
        v = tok_.text == "True";
        advance();
      } else {
        std::variant<int64_t, double> n = parseNumber("a constant (a number, True or False)");
        if (auto* i = std::get_if<int64_t>(&n))
          v = *i;
        else
          v = std::get<double>(n);
      }
      expect(K::Colon, "':' and the constant's dtype");
      op.dtype = parseDtype();
      if (op.dtype == ScalarType::Bool) {
        if (!std::holds_alternative<bool>(v)) fail(pos, "a b8 constant is True or False");
        op.intValue = std::get<bool>(v);
      } else if (isFloatingType(op.dtype)) {
        if (std::holds_alternative<bool>(v))
          fail(pos, std::string("a ") + dtypeShortName(op.dtype) + " constant is a number");
        op.floatValue = std::holds_alternative<double>(v) ? std::get<double>(v)
                                                          : double(std::get<int64_t>(v));
      } else {
        if (!std::holds_alternative<int64_t>(v))
          fail(pos, std::string("a ") + dtypeShortName(op.dtype) + " constant is an integer");
        op.intValue = std::get<int64_t>(v);
      }
      return;
    }
    case LoopOpCode::IndexExpr:
      op.index = parseExpr();
      expect(K::Colon, "':' and the index value's dtype");
      op.dtype = parseDtype();
      return;
    case LoopOpCode::Indirect: {
      // indirect %v size <expr> [wrap] as <var> error "<Type: message>"
      Token v = expect(K::Value, "the index value '%value' of indirect");
      auto it = values.find(v.text);
      if (it == values.end()) fail(v.pos, "use of undefined value %" + v.text);
      op.operands.push_back(it->second.first);
      op.dtype = ScalarType::Int64;
      expectKeyword("size", " and the size the value indexes");
      op.index = parseExpr();
      if (isKeyword("wrap")) {
        advance();
        op.wrap = true;
      }
      expectKeyword("as", " and the index variable it binds");
      op.var = expect(K::Identifier, "the index variable bound by indirect").text;
      expectKeyword("error", " and the error an out-of-range value raises");
      op.error = expect(K::String, "the error message \"Type: message\"").text;
      return;
    }
    default:
      break;
    }
    std::vector<ScalarType> dtypes;
    for (int i = 0; i < loopOpArity(op.code); ++i) {
      if (i) expect(K::Comma, std::string("',' and operand ") + std::to_string(i + 1) + " of " +
                                  loopOpName(op.code));
      Token v = expect(K::Value, std::string("an operand '%value' of ") + loopOpName(op.code));
      auto it = values.find(v.text);
      if (it == values.end()) fail(v.pos, "use of undefined value %" + v.text);
      op.operands.push_back(it->second.first);
      dtypes.push_back(body.ops[it->second.first].dtype);
    }
    if (op.code == LoopOpCode::Cast) {
      expect(K::Colon, "':' and the dtype to cast to");
      op.dtype = parseDtype();
    } else if (op.code == LoopOpCode::Store || op.code == LoopOpCode::Reduce) {
      op.dtype = dtypes[0];
    } else {
      op.dtype = inferLoopOpDtype(op.code, dtypes);
    }
  }

  IndexExpr parseExpr() { return IndexExprReader(lex_, tok_, "index expression").read(); }

  LoopProgram* program_ = nullptr;
  std::unordered_map<std::string, Definition> defs_;  // inputs and buffers of the program
  std::unordered_map<std::string, int> kernels_;      // kernel name -> line
};

} // namespace

LoopParseResult parseLoopPrograms(std::string_view text, int firstLine) {
  LoopParser p(text, firstLine);
  LoopParseResult r;
  r.error = p.firstErrorOf([&] { r.programs = p.parseAll(); });
  return r;
}

LoopProgram parseLoopProgram(std::string_view text) {
  LoopParseResult r = parseLoopPrograms(text);
  if (r.error) throw IRError(*r.error);
  if (r.programs.size() != 1)
    throw IRError(TextPos{1, 1},
                  "expected exactly one program, found " + std::to_string(r.programs.size()));
  return std::move(r.programs.front());
}

IndexExpr parseIndexExpr(std::string_view text) {
  LoopParser p(text, 1);
  return parseOnly<IndexExpr>(p, [&] { return p.parseExprOnly(); });
}

bool isLoopProgramText(std::string_view text) {
  try {
    Lexer lex(text);
    Token t = lex.next();
    return t.kind == Token::Kind::Identifier && t.text == "program";
  } catch (const std::exception&) {
    return false;
  }
}

} // namespace kiln
