// Loop-body helpers shared by the lowering's files (declared in Lowerer.h).
#include "compiler/lowering/Lowerer.h"

#include <bit>

#include "ir/IndexExprReader.h"

namespace kiln::compiler::lowering {

// The expression of a symbolic fill value ("s0*64"): an IRError on malformed text or trailing
// tokens.
IndexExpr symbolicFill(const std::string& text) {
  Lexer lex(text);
  Token tok = lex.next();
  IndexExpr e = IndexExprReader(lex, tok, "fill value expression").read();
  KILN_CHECK(tok.kind == Token::Kind::End, "lowering: prims.full: the fill value \"", text,
             "\" is not one size expression");
  return e;
}

// Identical ops are emitted once: a new op equal to an earlier one is dropped for it.
int dedupeLast(LoopBody& b) {
  const LoopOp& last = b.ops.back();
  for (size_t i = 0; i + 1 < b.ops.size(); ++i) {
    const LoopOp& o = b.ops[i];
    if (o.code == last.code && o.dtype == last.dtype && o.operands == last.operands &&
        o.buffer == last.buffer && o.index == last.index && o.intValue == last.intValue &&
        std::bit_cast<uint64_t>(o.floatValue) == std::bit_cast<uint64_t>(last.floatValue)) {
      b.ops.pop_back();
      return int(i);
    }
  }
  return int(b.ops.size()) - 1;
}

int emitLoad(BodyContext& c, const std::string& buf, const IndexExpr& index, ScalarType dtype) {
  c.body.load(buf, simplify(index, c.facts), dtype);
  return dedupeLast(c.body);
}

int emitIndexExpr(BodyContext& c, const IndexExpr& e) {
  c.body.indexExpr(simplify(e, c.facts), ScalarType::Int64);
  return dedupeLast(c.body);
}

int emitCast(BodyContext& c, int v, ScalarType dtype) {
  if (c.body.ops[v].dtype == dtype) return v;
  c.body.cast(v, dtype);
  return dedupeLast(c.body);
}

int emitMath(BodyContext& c, LoopOpCode code, std::vector<int> operands) {
  c.body.math(code, std::move(operands));
  return dedupeLast(c.body);
}

// A constant of `dtype` from a Python number (bool, int or float).
int emitConstant(BodyContext& c, const Argument& value, ScalarType dtype) {
  double f = value.kind() == Argument::Kind::Float  ? value.toFloat()
             : value.kind() == Argument::Kind::Bool ? double(value.toBool())
                                                    : double(value.toInt());
  if (isFloatingType(dtype)) {
    c.body.constantFloat(f, dtype);
  } else if (dtype == ScalarType::Bool) {
    c.body.constantInt(f != 0, dtype);
  } else {
    // Wrapped to the dtype's width as c10's casts do (masked_fill(uint8, -1) writes 255).
    int64_t v = value.kind() == Argument::Kind::Int ? value.toInt() : int64_t(f);
    switch (dtype) {
      case ScalarType::UInt8: v = static_cast<uint8_t>(v); break;
      case ScalarType::Int8: v = static_cast<int8_t>(v); break;
      case ScalarType::Int16: v = static_cast<int16_t>(v); break;
      case ScalarType::Int32: v = static_cast<int32_t>(v); break;
      default: break;
    }
    c.body.constantInt(v, dtype);
  }
  return dedupeLast(c.body);
}

// Row-major strides of symbolic sizes.
Shape rowMajorStrides(const Shape& sizes) {
  Shape s(sizes.size(), IndexExpr(1));
  for (size_t d = sizes.size(); d-- > 1;) s[d - 1] = s[d] * sizes[d];
  return s;
}

IndexExpr flatIndex(const Index& idx, const Shape& strides) {
  IndexExpr e(0);
  for (size_t d = 0; d < idx.size(); ++d) e = e + idx[d] * strides[d];
  return e;
}

IndexExpr product(const Shape& sizes) {
  IndexExpr p(1);
  for (const IndexExpr& s : sizes) p = p * s;
  return p;
}

// The range facts of the size symbols in `e` (each at least kMinSizeSymbol).
void addSymbolFacts(RangeFacts& facts, const IndexExpr& e) {
  for (const std::string& s : e.variables())
    if (!facts.count(s)) facts[s] = VarRange{kMinSizeSymbol, std::nullopt};
}

std::string shapeString(const Shape& sizes) {
  std::string r = "[";
  for (size_t d = 0; d < sizes.size(); ++d) r += (d ? ", " : "") + sizes[d].str();
  return r + "]";
}

Index loopVars(const char* prefix, size_t n) {
  Index v;
  for (size_t d = 0; d < n; ++d) v.push_back(IndexExpr::var(prefix + std::to_string(d)));
  return v;
}

// Loop variables prefix0, prefix1, ... over `extents`; a symbolic extent bounds its variable
// from below only (its symbols get their facts).
std::vector<IterVar> iterVars(const char* prefix, const Shape& extents, RangeFacts& facts) {
  std::vector<IterVar> r;
  for (size_t d = 0; d < extents.size(); ++d) {
    std::string name = prefix + std::to_string(d);
    r.push_back({name, extents[d]});
    addSymbolFacts(facts, extents[d]);
    facts[name] = VarRange{0, extents[d].constant()};
  }
  return r;
}

std::vector<IndexExpr> exprs(const std::vector<int64_t>& v) {
  return std::vector<IndexExpr>(v.begin(), v.end());
}

std::vector<int64_t> intList(const Argument& a, const std::string& what) {
  KILN_CHECK(a.isSequence(), "lowering: ", what, " must be a list of ints");
  std::vector<int64_t> r;
  for (const Argument& x : a.items()) {
    KILN_CHECK(x.kind() == Argument::Kind::Int, "lowering: ", what,
               " must be a list of static ints");
    r.push_back(x.toInt());
  }
  return r;
}

const TensorType& tensorTypeOf(const Node* n) {
  KILN_CHECK(n->meta.type && n->meta.type->isTensor(), "lowering: %", n->name(),
             " has no tensor type (retrace the graph to prims first)");
  return n->meta.type->tensor();
}

// The argument at `pos`, else the keyword `name`, else null.
const Argument* argOf(const Node* n, size_t pos, std::string_view name) {
  if (pos < n->args().size()) return &n->args()[pos];
  return n->kwarg(name);
}

// The Core ATen indexing ops lowered directly (see Lowerer::lowerIndexing), without "aten.".
bool isLoweredIndexingOp(const std::string& target) {
  static const std::set<std::string> ops = {
      "aten.gather",      "aten.index_select", "aten.embedding",   "aten.index.Tensor",
      "aten.index_put",   "aten.scatter.src",  "aten.scatter.value", "aten.scatter_add",
      "aten.embedding_dense_backward"};
  return ops.count(target) > 0;
}

} // namespace kiln::compiler::lowering
