// Lowering of prims graphs to loop programs (see Lowering.h): loaders, view index composition,
// reductions, extern kernels and the realization policy.
#include "compiler/Lowering.h"

#include <cstdint>
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "ir/IndexExprReader.h"
#include "runtime/Error.h"
#include "runtime/TensorImpl.h"

namespace kiln::compiler {

namespace {

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

using Index = std::vector<IndexExpr>;
// Sizes and strides: constants, or expressions over size symbols (each >= kMinSizeSymbol).
using Shape = std::vector<IndexExpr>;

// A shared value whose loader emits more ops than this is realized into a buffer instead of
// being recomputed by every consumer; a value this large or larger always is (bounds the
// recomputation of deep chains).
constexpr int64_t kSharedRecomputeLimit = 32;
constexpr int64_t kRecomputeLimit = 512;
// A shared value that reads more than this many elements of memory per element is realized
// too, however few ops it has (Inductor's realize_reads_threshold): a residual stream built
// by adds over many layers' outputs would otherwise be re-read from every one of them by each
// consumer, and by every pass of a row reduction (layer norm's mean, variance and output).
constexpr int64_t kSharedReadLimit = 4;

// The body being built, with the ranges of its loop variables (for simplifying indices).
struct BodyContext {
  LoopBody body;
  RangeFacts facts;
};

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

using Loader = std::function<int(BodyContext&, const Index&)>;
using IndexMap = std::function<Index(const Index&)>;

// A lowered node: its element type and shape and how to compute the element at an index.
struct Value {
  ScalarType dtype = ScalarType::Float32;
  Shape sizes;
  Loader load;
  // The input or buffer this value is exactly (input geometry, or a contiguous buffer).
  std::string storage;
  // How many ops the loader emits (counting shared subexpressions once per use).
  int64_t cost = 1;
  // A view (a chain of view prims) shares the storage of the node it views: `aliasOf`, whose
  // element at aliasMap(index) it is. An in-place write through any alias is seen by all of
  // them, so their loaders are rebuilt from the root's after every write. `aliasWhole`: the
  // view is the whole root (view_of, a reshape to the same sizes).
  const Node* aliasOf = nullptr;
  IndexMap aliasMap;
  bool aliasWhole = false;
};

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

class Lowerer {
public:
  explicit Lowerer(const Graph& g) : graph_(g) {
    program_.name = g.name();
    for (Node* n : g.nodes()) {
      names_.insert(n->name());
      order_[n] = order_.size();
    }
  }

  LoopProgram run() {
    for (Node* n : graph_.nodes()) {
      switch (n->opcode()) {
      case Opcode::Placeholder:
        lowerInput(n);
        break;
      case Opcode::CallFunction:
        lowerCall(n);
        break;
      case Opcode::Output:
        lowerOutput(n);
        break;
      default:
        throw Error("lowering: cannot lower the " + std::string(opcodeName(n->opcode())) +
                    " node %" + n->name() + " (" + n->target() + "); only prims graphs lower");
      }
    }
    return std::move(program_);
  }

private:
  std::string freshName() {
    for (;;) {
      std::string n = "buf" + std::to_string(counter_++);
      if (names_.insert(n).second) return n;
    }
  }

  Value bufferValue(const std::string& name, ScalarType dtype, const std::vector<int64_t>& sizes) {
    return bufferValue(name, dtype, exprs(sizes));
  }

  Value bufferValue(const std::string& name, ScalarType dtype, Shape sizes) {
    Value v;
    v.dtype = dtype;
    v.sizes = sizes;
    v.storage = name;
    Shape strides = rowMajorStrides(sizes);
    v.load = [name, dtype, strides](BodyContext& c, const Index& idx) {
      return emitLoad(c, name, flatIndex(idx, strides), dtype);
    };
    return v;
  }

  // The name of an input or buffer holding v's elements; computes a pointwise buffer when v
  // is not one yet (and from then on v loads from it).
  // How many loads from memory one element of v emits (identical loads counted once).
  int64_t loadsOf(const Value& v) {
    BodyContext c;
    iterVars("i", v.sizes, c.facts);
    v.load(c, loopVars("i", v.sizes.size()));
    return std::count_if(c.body.ops.begin(), c.body.ops.end(),
                         [](const LoopOp& op) { return op.code == LoopOpCode::Load; });
  }

  std::string realize(Value& v) {
    if (!v.storage.empty()) return v.storage;
    std::string name = freshName();
    bool alias = v.aliasOf != nullptr;
    Pointwise pw;
    BodyContext c;
    pw.ranges = iterVars("i", v.sizes, c.facts);
    int x = v.load(c, loopVars("i", v.sizes.size()));
    x = emitCast(c, x, v.dtype);
    c.body.store(x);
    pw.body = std::move(c.body);
    program_.buffers.push_back(Buffer{name, v.dtype, v.sizes, std::move(pw), "", {}});
    // A view stays a view of its root (a later write must reach it): its copy is not reused.
    if (!alias) v = bufferValue(name, v.dtype, v.sizes);
    return name;
  }

  // Whether v, computed in row-major order, would gather from memory and its transpose in the
  // last two dims would not: some load steps by 1 down v's columns and by more than 1 along
  // its rows, and none steps by 1 along the rows (k.transpose(-2, -1) of a fused q/k/v
  // projection, copied by the reshape that folds the heads into the batch: a stride of 384).
  bool gathersAlongRows(const Value& v) {
    size_t rank = v.sizes.size();
    if (!v.storage.empty() || rank < 2 || v.sizes[rank - 1] == IndexExpr(1) || v.sizes[rank - 2] == IndexExpr(1))
      return false;
    BodyContext c;
    iterVars("v", v.sizes, c.facts);
    v.load(c, loopVars("v", rank));
    std::map<std::string, IndexExpr> zero;
    for (size_t d = 0; d < rank; ++d) zero["v" + std::to_string(d)] = IndexExpr(0);
    bool gathers = false;
    for (const LoopOp& op : c.body.ops) {
      if (op.code != LoopOpCode::Load) continue;
      IndexExpr origin = op.index.substitute(zero);
      // How far the load moves for one step along dim d.
      auto step = [&](size_t d) {
        std::map<std::string, IndexExpr> at = zero;
        at["v" + std::to_string(d)] = IndexExpr(1);
        return simplify(op.index.substitute(at) - origin, c.facts).constant();
      };
      std::optional<int64_t> down = step(rank - 2), along = step(rank - 1);
      if (!down || !along || *along == 1) return false;
      gathers = gathers || (*down == 1 && *along > 1);
    }
    return gathers;
  }

  // Computes v into a buffer in the transposed order of its last two dims (both sides of the
  // copy contiguous in the inner loop) and makes v read that buffer transposed: a GEMM then
  // reads v as a strided view of it (its trans flag) instead of a row-major copy.
  void realizeTransposed(Value& v) {
    size_t rank = v.sizes.size();
    Value t;
    t.dtype = v.dtype;
    t.sizes = v.sizes;
    std::swap(t.sizes[rank - 2], t.sizes[rank - 1]);
    t.cost = v.cost;
    t.load = [load = v.load, rank](BodyContext& c, const Index& idx) {
      Index swapped = idx;
      std::swap(swapped[rank - 2], swapped[rank - 1]);
      return load(c, swapped);
    };
    Loader copy = bufferValue(realize(t), t.dtype, t.sizes).load;
    v.load = [copy, rank](BodyContext& c, const Index& idx) {
      Index swapped = idx;
      std::swap(swapped[rank - 2], swapped[rank - 1]);
      return copy(c, swapped);
    };
    v.cost = 1;
  }

  // When v is a strided view of an input or buffer that is not v itself (a transpose, a
  // reshape, a slice: its loader is one load at an affine index), that storage and the view,
  // so an extern kernel can read it in place instead of from a realized copy.
  std::optional<std::pair<std::string, StridedView>> stridedView(const Value& v) {
    if (!v.storage.empty()) return std::nullopt;
    BodyContext c;
    iterVars("v", v.sizes, c.facts);
    Index vars = loopVars("v", v.sizes.size());
    int x = v.load(c, vars);
    if (c.body.ops.size() != 1 || x != 0 || c.body.ops[0].code != LoopOpCode::Load ||
        c.body.ops[0].dtype != v.dtype)
      return std::nullopt;
    const IndexExpr& index = c.body.ops[0].index;
    // The offset (every view variable 0) must be a constant; each stride is the index's
    // change for one step of its variable (an expression over size symbols, at least 0).
    std::map<std::string, IndexExpr> at;
    for (size_t d = 0; d < vars.size(); ++d) at["v" + std::to_string(d)] = IndexExpr(0);
    std::optional<int64_t> offset = simplify(index.substitute(at), c.facts).constant();
    if (!offset || *offset < 0) return std::nullopt;
    StridedView view;
    view.offset = *offset;
    view.sizes = v.sizes;
    IndexExpr affine(*offset);
    for (size_t d = 0; d < vars.size(); ++d) {
      std::string var = "v" + std::to_string(d);
      at[var] = IndexExpr(1);
      IndexExpr stride = v.sizes[d] == IndexExpr(1) ? IndexExpr(0)
                                                    : simplify(index.substitute(at) - IndexExpr(*offset), c.facts);
      at[var] = IndexExpr(0);
      std::optional<int64_t> lo = bounds(stride, c.facts).lo;
      if (!lo || *lo < 0) return std::nullopt;
      view.strides.push_back(stride);
      if (v.sizes[d] != IndexExpr(1)) affine = affine + stride * vars[d];
    }
    if (simplify(affine, c.facts) != index) return std::nullopt;
    return std::pair{c.body.ops[0].buffer, view};
  }

  // The extern-computed buffer v reshapes (a row-major view of all of it, offset 0), when it
  // is not an output already; else null.
  Buffer* reshapedExternResult(const Value& v) {
    auto view = stridedView(v);
    if (!view || view->second.offset != 0) return nullptr;
    Buffer* b = nullptr;
    for (Buffer& candidate : program_.buffers)
      if (candidate.name == view->first && candidate.isExtern()) b = &candidate;
    if (!b || std::count(program_.outputs.begin(), program_.outputs.end(), b->name)) return nullptr;
    // Extern consumers read it by its own shape.
    for (const Buffer& other : program_.buffers)
      if (const auto* x = std::get_if<Extern>(&other.computation))
        if (std::count(x->inputs.begin(), x->inputs.end(), b->name)) return nullptr;
    Shape contiguous = rowMajorStrides(v.sizes);
    for (size_t d = 0; d < v.sizes.size(); ++d)
      if (v.sizes[d] != IndexExpr(1) && view->second.strides[d] != contiguous[d]) return nullptr;
    return product(v.sizes) == product(b->sizes) ? b : nullptr;
  }

  // When output `t` is the transpose of an mm's result that nothing else reads (a linear
  // layer's weight gradient, t(mm(t(grad), x)), in every backward graph), that mm buffer,
  // rewritten to compute the transposed product C^T = B^T A^T directly in the output's
  // row-major layout; else null. (Before: the product, then a transposing copy of it.)
  Buffer* transposedMmResult(const Node* t, const Value& v) {
    if (v.sizes.size() != 2 || !v.aliasOf || t->users().size() != 1) return nullptr;
    const Node* mm = v.aliasOf;
    const Argument* arg = argOf(t, 0, "a");
    if (!arg || !arg->isNode() || arg->toNode() != mm || mm->users().size() != 1) return nullptr;
    auto view = stridedView(v);
    if (!view || view->second.offset != 0 || values_.at(mm).storage != view->first) return nullptr;
    Buffer* b = nullptr;
    for (Buffer& candidate : program_.buffers)
      if (candidate.name == view->first) b = &candidate;
    auto* x = b ? std::get_if<Extern>(&b->computation) : nullptr;
    if (!x || x->kernel != "mm" || b->sizes.size() != 2 ||
        std::count(program_.outputs.begin(), program_.outputs.end(), b->name) ||
        view->second.strides != std::vector<IndexExpr>{IndexExpr(1), b->sizes[1]})
      return nullptr;
    auto transposed = [&](size_t i) {
      StridedView s = x->viewOf(i) ? *x->viewOf(i) : wholeLayout(x->inputs[i]);
      std::swap(s.sizes[0], s.sizes[1]);
      std::swap(s.strides[0], s.strides[1]);
      return s;
    };
    std::vector<std::optional<StridedView>> views = {transposed(1), transposed(0)};
    std::swap(x->inputs[0], x->inputs[1]);
    x->views = std::move(views);
    for (size_t i = 0; i < 2; ++i)  // a view of all of an input in its own layout is no view
      if (x->views[i] == wholeLayout(x->inputs[i])) x->views[i] = std::nullopt;
    if (!x->views[0] && !x->views[1]) x->views.clear();
    b->sizes = v.sizes;
    return b;
  }

  // The layout of a whole input or buffer, as a view of its storage. A version written in
  // place (a scatter into zeros) stands for its root's whole storage: its own sizes are the
  // scatter's iteration domain, not the storage's shape.
  StridedView wholeLayout(const std::string& version) {
    const std::string name = program_.storageRoot(version);
    for (const LoopInput& in : program_.inputs)
      if (in.name == name) return StridedView{0, in.sizes, in.strides};
    for (const Buffer& b : program_.buffers)
      if (b.name == name) return StridedView{0, b.sizes, rowMajorStrides(b.sizes)};
    KILN_CHECK(false, "lowering: no input or buffer %", name);
    return {};
  }

  Value& valueOf(const Node* n) {
    auto it = values_.find(n);
    KILN_CHECK(it != values_.end(), "lowering: %", n->name(), " is not a lowered tensor value");
    return it->second;
  }

  const Node* operandNode(const Node* n, size_t pos, std::string_view name) {
    const Argument* a = argOf(n, pos, name);
    KILN_CHECK(a && a->isNode(), "lowering: ", n->target(), " expects a tensor for ", name);
    return a->toNode();
  }

  Value& operand(const Node* n, size_t pos, std::string_view name) {
    return valueOf(operandNode(n, pos, name));
  }

  void lowerInput(const Node* n) {
    const TensorType& t = tensorTypeOf(n);
    LoopInput in;
    in.name = n->name();
    in.dtype = t.dtype;
    Shape sizes = t.sizes;
    Shape strides = t.strides ? *t.strides : rowMajorStrides(sizes);
    in.sizes = sizes;
    in.strides = strides;
    program_.inputs.push_back(in);
    Value v;
    v.dtype = t.dtype;
    v.sizes = sizes;
    v.storage = n->name();
    std::string name = n->name();
    ScalarType dtype = t.dtype;
    v.load = [name, dtype, strides](BodyContext& c, const Index& idx) {
      return emitLoad(c, name, flatIndex(idx, strides), dtype);
    };
    values_[n] = std::move(v);
  }

  void lowerOutput(const Node* n) {
    KILN_CHECK(!n->args().empty(), "lowering: the output node has no value");
    const Argument& r = n->args()[0];
    std::vector<Argument> items = r.isSequence() ? r.items() : std::vector<Argument>{r};
    // A buffer two outputs read (a training forward returns h.view(5, 2, 12) and saves h)
    // keeps its own shape and layout: reshaping or transposing it for one would hand the
    // other that shape too.
    auto storageOf = [this](const Value& v) -> std::string {
      if (!v.storage.empty()) return v.storage;
      auto view = stridedView(v);
      return view ? view->first : "";
    };
    std::map<std::string, std::set<const Node*>> outputsReading; // (an output listed twice is one)
    for (const Argument& a : items)
      if (a.isNode()) outputsReading[storageOf(valueOf(a.toNode()))].insert(a.toNode());
    for (const Argument& a : items) {
      KILN_CHECK(a.isNode(), "lowering: graph outputs must be tensors");
      Value& v = valueOf(a.toNode());
      std::string storage = storageOf(v);
      bool shared = !storage.empty() && outputsReading[storage].size() > 1;
      if (Buffer* b = shared ? nullptr : transposedMmResult(a.toNode(), v)) {
        v = bufferValue(b->name, v.dtype, v.sizes);
      } else if (Buffer* b = shared ? nullptr : reshapedExternResult(v)) {
        // The output is the extern's result read whole in row-major order (e.g. bmm's
        // [b, m, n] result viewed as [2, 4, m, n]): the result takes the output's shape
        // instead of being copied (its loads index it flat, so they are unchanged).
        b->sizes = v.sizes;
        v = bufferValue(b->name, v.dtype, v.sizes);
      }
      program_.outputs.push_back(realize(v));
    }
  }

  // A value computed from `parts` by `load`, with n's type.
  Value derived(const Node* n, Loader load, int64_t cost) {
    const TensorType& t = tensorTypeOf(n);
    Value v;
    v.dtype = t.dtype;
    v.sizes = t.sizes;
    v.load = std::move(load);
    v.cost = cost;
    return v;
  }

  // The element at an output index is the input's (argument `a`) at index `map(idx)`: a view
  // of the input's storage, or with `alias` false a new tensor computed that way (rev).
  Value view(const Node* n, IndexMap map, bool alias = true) {
    const Node* inNode = operandNode(n, 0, "a");
    const Value& in = valueOf(inNode);
    Loader inner = in.load;
    Value v = derived(
        n, [inner, map](BodyContext& c, const Index& idx) { return inner(c, map(idx)); },
        in.cost);
    if (!alias) return v;
    if (in.aliasOf) {
      IndexMap outer = in.aliasMap;
      v.aliasOf = in.aliasOf;
      v.aliasMap = [outer, map](const Index& idx) { return outer(map(idx)); };
    } else {
      v.aliasOf = inNode;
      v.aliasMap = map;
    }
    return v;
  }

  // The input (argument `a`) itself under another name: a view of all of it.
  Value wholeView(const Node* n) {
    const Node* inNode = operandNode(n, 0, "a");
    Value v = valueOf(inNode);
    if (!v.aliasOf) {
      v.aliasOf = inNode;
      v.aliasMap = [](const Index& idx) { return idx; };
      v.aliasWhole = true;
    }
    return v;
  }

  void lowerCall(const Node* n) {
    const std::string& target = n->target();
    if (target == "aten.max_pool2d_with_indices") {
      tuples_[n] = lowerMaxPool2d(n);
      return;
    }
    if (target == "aten.max_pool2d_with_indices_backward") {
      values_[n] = lowerMaxPool2dBackward(n);
    } else if (target == "aten.avg_pool2d" || target == "aten._adaptive_avg_pool2d") {
      values_[n] = lowerAvgPool2d(n, target == "aten._adaptive_avg_pool2d");
    } else if (target == "aten.avg_pool2d_backward" || target == "aten._adaptive_avg_pool2d_backward") {
      values_[n] = lowerAvgPool2dBackward(n, target == "aten._adaptive_avg_pool2d_backward");
    } else if (target == "operator.getitem") {
      values_[n] = tupleItem(n);
    } else if (target == "aten.cumsum" || target == "aten.cumprod") {
      values_[n] = lowerScan(n, target == "aten.cumprod");
    } else if (target.starts_with("aten.") && isLoweredIndexingOp(target)) {
      values_[n] = lowerIndexing(n, target.substr(5));
    } else {
      KILN_CHECK(target.starts_with("prims."), "lowering: cannot lower ", target,
                 " (%", n->name(), "): only prims and the indexing ops of Lowering.h lower; "
                 "retrace the graph to prims first");
      values_[n] = lowerPrim(n, target.substr(6));
    }
    Value& v = values_.at(n);
    // Realization policy: a value recomputed by several consumers stays cheap. For a view the
    // root is realized (the view keeps aliasing it, and loads it from memory).
    bool shared = n->users().size() > 1;
    if (v.storage.empty() &&
        (v.cost > kRecomputeLimit || (shared && v.cost > kSharedRecomputeLimit) ||
         (shared && v.cost > kSharedReadLimit && loadsOf(v) > kSharedReadLimit))) {
      if (!v.aliasOf) {
        realize(v);
      } else if (values_.at(v.aliasOf).storage.empty()) {
        const Node* root = v.aliasOf;
        realize(values_.at(root));
        refreshAliases(root);
      }
    }
  }

  // getitem(tuple, i) of a lowered op with several results.
  Value tupleItem(const Node* n) {
    const Node* src = operandNode(n, 0, "a");
    auto it = tuples_.find(src);
    KILN_CHECK(it != tuples_.end(), "lowering: getitem (%", n->name(), ") of %", src->name(),
               ", which is not a lowered op with several results");
    const Argument* i = argOf(n, 1, "b");
    KILN_CHECK(i && i->kind() == Argument::Kind::Int && i->toInt() >= 0 &&
                   size_t(i->toInt()) < it->second.size(),
               "lowering: getitem (%", n->name(), ") needs an index into %", src->name(), "'s results");
    return it->second[size_t(i->toInt())];
  }

  Value lowerPrim(const Node* n, const std::string& prim) {
    if (prim == "log10") return lowerLog10(n);
    std::optional<LoopOpCode> code = loopOpFromName(prim);
    if (code && loopOpArity(*code) > 0 && *code != LoopOpCode::Cast &&
        *code != LoopOpCode::Store && *code != LoopOpCode::Reduce)
      return lowerElementwise(n, *code);
    if (prim == "convert_element_type") {
      const Value& a = operand(n, 0, "a");
      ScalarType dtype = tensorTypeOf(n).dtype;
      Loader inner = a.load;
      return derived(
          n, [inner, dtype](BodyContext& c, const Index& idx) {
            return emitCast(c, inner(c, idx), dtype);
          },
          a.cost + 1);
    }
    if (prim == "view_of") return wholeView(n);
    if (prim == "clone" || prim == "device_put") {
      Value v = operand(n, 0, "a");
      v.storage.clear(); // a new tensor: the output must not alias the input
      v.aliasOf = nullptr;
      v.aliasWhole = false;
      return v;
    }
    if (prim == "copy_to") return lowerCopyTo(n);
    if (prim == "broadcast_in_dim") return lowerBroadcast(n);
    if (prim == "squeeze") {
      const Value& a = operand(n, 0, "a");
      std::vector<int64_t> dims = intList(*argOf(n, 1, "dimensions"), "squeeze dimensions");
      std::vector<bool> squeezed(a.sizes.size(), false);
      for (int64_t d : dims) squeezed.at(size_t(d < 0 ? d + int64_t(a.sizes.size()) : d)) = true;
      return view(n, [squeezed](const Index& idx) {
        Index in;
        size_t k = 0;
        for (bool s : squeezed) in.push_back(s ? IndexExpr(0) : idx.at(k++));
        return in;
      });
    }
    if (prim == "transpose") {
      std::vector<int64_t> perm = intList(*argOf(n, 1, "permutation"), "transpose permutation");
      return view(n, [perm](const Index& idx) {
        Index in(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) in.at(size_t(perm[i])) = idx.at(i);
        return in;
      });
    }
    if (prim == "slice") {
      std::vector<int64_t> start = intList(*argOf(n, 1, "start_indices"), "slice start_indices");
      const Argument* st = argOf(n, 3, "strides");
      std::vector<int64_t> step =
          st && !st->isNone() ? intList(*st, "slice strides") : std::vector<int64_t>(start.size(), 1);
      return view(n, [start, step](const Index& idx) {
        Index in;
        for (size_t d = 0; d < idx.size(); ++d) in.push_back(IndexExpr(start[d]) + idx[d] * step[d]);
        return in;
      });
    }
    if (prim == "rev") {
      const Value& a = operand(n, 0, "a");
      std::vector<int64_t> dims = intList(*argOf(n, 1, "dims"), "rev dims");
      Shape sizes = a.sizes;
      std::vector<bool> flip(sizes.size(), false);
      for (int64_t d : dims) flip.at(size_t(d < 0 ? d + int64_t(sizes.size()) : d)) = true;
      return view(
          n,
          [sizes, flip](const Index& idx) {
            Index in;
            for (size_t d = 0; d < idx.size(); ++d)
              in.push_back(flip[d] ? sizes[d] - IndexExpr(1) - idx[d] : idx[d]);
            return in;
          },
          /*alias=*/false); // rev makes a new tensor
    }
    if (prim == "reshape") return lowerReshape(n);
    if (prim == "cat") return lowerCat(n);
    if (prim == "empty_strided") {
      // Uninitialized memory: any values will do, zeros are cheapest to compute.
      ScalarType dtype = tensorTypeOf(n).dtype;
      return derived(
          n, [dtype](BodyContext& c, const Index&) { return emitConstant(c, Argument(int64_t(0)), dtype); },
          1);
    }
    if (prim == "full") {
      const Argument* fill = argOf(n, 1, "fill_value");
      ScalarType dtype = tensorTypeOf(n).dtype;
      if (fill && fill->kind() == Argument::Kind::String) {
        // A fill value over the size symbols (a mean's element count, fitted over the probe
        // sizes by kiln/compiler/dynamic.py), written as its expression: "s0*64".
        IndexExpr count = symbolicFill(fill->toString());
        return derived(
            n, [count, dtype](BodyContext& c, const Index&) { return emitCast(c, emitIndexExpr(c, count), dtype); },
            1);
      }
      KILN_CHECK(fill && fill->isNumber(), "lowering: prims.full needs a number fill_value");
      Argument value = *fill;
      return derived(
          n, [value, dtype](BodyContext& c, const Index&) { return emitConstant(c, value, dtype); },
          1);
    }
    if (prim == "iota") {
      const Argument* start = argOf(n, 1, "start");
      const Argument* step = argOf(n, 2, "step");
      KILN_CHECK(start && step && start->kind() == Argument::Kind::Int &&
                     step->kind() == Argument::Kind::Int,
                 "lowering: prims.iota needs static start and step");
      int64_t s0 = start->toInt(), s1 = step->toInt();
      ScalarType dtype = tensorTypeOf(n).dtype;
      return derived(
          n, [s0, s1, dtype](BodyContext& c, const Index& idx) {
            return emitCast(c, emitIndexExpr(c, IndexExpr(s0) + idx.at(0) * s1), dtype);
          },
          2);
    }
    if (prim == "sum") return lowerReduction(n, ReductionKind::Sum);
    if (prim == "prod") return lowerReduction(n, ReductionKind::Prod);
    if (prim == "amax") return lowerReduction(n, ReductionKind::Max);
    if (prim == "amin") return lowerReduction(n, ReductionKind::Min);
    if (prim == "argmax") return lowerReduction(n, ReductionKind::ArgMax);
    if (prim == "argmin") return lowerReduction(n, ReductionKind::ArgMin);
    if (prim == "var") return lowerVar(n);
    if ((prim == "mm" || prim == "bmm") && !isFloatingType(tensorTypeOf(n).dtype))
      return lowerMatmulLoops(n, prim == "bmm");
    if (prim == "mm" || prim == "bmm") {
      Extern x{prim, {}, {}, {}};
      // An f32 product of two operands converted from one 16-bit float type (a 16-bit addmm's
      // decomposition) reads the 16-bit operands: the GEMM library multiplies them with f32
      // accumulation and output (bfloat16 on the CPU's bf16 units) without widened copies.
      const Node* from16[2] = {operandNode(n, 0, "self"), operandNode(n, 1, "mat2")};
      for (const Node*& a : from16) {
        a = a->target() == "prims.convert_element_type" ? operandNode(a, 0, "a") : nullptr;
        ScalarType d = a ? tensorTypeOf(a).dtype : ScalarType::Float32;
        if (d != ScalarType::Float16 && d != ScalarType::BFloat16) a = nullptr;
      }
      bool mixed = tensorTypeOf(n).dtype == ScalarType::Float32 && from16[0] && from16[1] &&
                   tensorTypeOf(from16[0]).dtype == tensorTypeOf(from16[1]).dtype;
      for (auto [pos, arg] : {std::pair<size_t, const char*>{0, "self"}, {1, "mat2"}}) {
        Value& v = mixed ? valueOf(from16[pos]) : operand(n, pos, arg);
        auto view = stridedView(v);
        if (!view && v.aliasOf && values_.at(v.aliasOf).storage.empty()) {
          // A view (a transpose) of a value not computed yet: compute the value in its own
          // order and let the GEMM read the view, rather than computing it in the view's order
          // (strided writes or reads in the loop nest).
          const Node* root = v.aliasOf;
          Value& r = values_.at(root);
          if (gathersAlongRows(r))
            realizeTransposed(r);
          else
            realize(r);
          refreshAliases(root);
          view = stridedView(v);
        }
        if (!view && !v.aliasOf && gathersAlongRows(v)) {
          realizeTransposed(v);
          view = stridedView(v);
        }
        x.inputs.push_back(view ? view->first : realize(v));
        x.views.push_back(view ? std::optional(view->second) : std::nullopt);
      }
      if (std::none_of(x.views.begin(), x.views.end(), [](const auto& v) { return v.has_value(); }))
        x.views.clear();
      const TensorType& t = tensorTypeOf(n);
      std::string name = freshName();
      program_.buffers.push_back(Buffer{name, t.dtype, t.sizes, std::move(x), "", {}});
      return bufferValue(name, t.dtype, t.sizes);
    }
    throw NotImplementedError("lowering: prims." + prim + " (%" + n->name() +
                              ") has no loop lowering");
  }

  // mm / bmm of integers (no GEMM library has them) as a sum reduction over the inner dim,
  // accumulated in their own type. Floating types, 16-bit ones included, are extern GEMMs.
  Value lowerMatmulLoops(const Node* n, bool batched) {
    const Value& a = operand(n, 0, "self");
    const Value& b = operand(n, 1, "mat2");
    const TensorType& t = tensorTypeOf(n);
    Shape sizes = t.sizes;
    size_t rank = batched ? 3 : 2;
    KILN_CHECK(a.sizes.size() == rank && b.sizes.size() == rank && sizes.size() == rank,
               "lowering: prims.", batched ? "bmm" : "mm", " needs ", rank, "-D operands");
    ScalarType acc = t.dtype == ScalarType::Float16 || t.dtype == ScalarType::BFloat16
                         ? ScalarType::Float32
                         : t.dtype;
    Reduction red;
    red.kind = ReductionKind::Sum;
    BodyContext c;
    red.ranges = iterVars("i", sizes, c.facts);
    red.reductionRanges = iterVars("r", Shape{a.sizes[rank - 1]}, c.facts);
    Index out = loopVars("i", rank);
    IndexExpr k = IndexExpr::var("r0");
    Index ia = out, ib = out;
    ia[rank - 1] = k;
    ib[rank - 2] = k;
    int x = emitCast(c, a.load(c, ia), acc);
    int y = emitCast(c, b.load(c, ib), acc);
    c.body.reduce(emitMath(c, LoopOpCode::Mul, {x, y}));
    red.body = std::move(c.body);
    std::string name = freshName();
    program_.buffers.push_back(Buffer{name, acc, sizes, std::move(red), "", {}});
    Loader sum = bufferValue(name, acc, sizes).load;
    ScalarType dtype = t.dtype;
    return derived(
        n, [sum, dtype](BodyContext& c, const Index& idx) { return emitCast(c, sum(c, idx), dtype); }, 2);
  }

  // cat along `dim`: the element at idx comes from the part whose slice of dim holds
  // idx[dim], chosen by comparisons; each part is loaded at idx[dim] - offset taken modulo its
  // size, an in-bounds index even where that part is not selected (a where computes both sides).
  Value lowerCat(const Node* n) {
    const Argument* list = argOf(n, 0, "tensors");
    const Argument* dimArg = argOf(n, 1, "dim");
    KILN_CHECK(list && list->isSequence() && dimArg && dimArg->kind() == Argument::Kind::Int,
               "lowering: prims.cat needs a list of tensors and a static dim");
    const TensorType& t = tensorTypeOf(n);
    const Shape& sizes = t.sizes;
    size_t dim = size_t(dimArg->toInt() < 0 ? dimArg->toInt() + int64_t(sizes.size()) : dimArg->toInt());
    KILN_CHECK(dim < sizes.size(), "lowering: prims.cat dim out of range");
    std::vector<Loader> parts;
    Shape offsets, extents;
    IndexExpr offset(0);
    int64_t cost = 0;
    for (const Argument& a : list->items()) {
      KILN_CHECK(a.isNode(), "lowering: prims.cat expects tensors");
      const Value& v = valueOf(a.toNode());
      KILN_CHECK(v.sizes.size() == sizes.size(), "lowering: prims.cat parts must have the result's rank");
      if (v.sizes[dim] == IndexExpr(0)) continue;
      parts.push_back(v.load);
      offsets.push_back(offset);
      extents.push_back(v.sizes[dim]);
      offset = offset + v.sizes[dim];
      cost += v.cost + 3;
    }
    ScalarType dtype = t.dtype;
    if (parts.empty()) {
      return derived(
          n, [dtype](BodyContext& c, const Index&) { return emitConstant(c, Argument(int64_t(0)), dtype); },
          1);
    }
    return derived(
        n, [parts, offsets, extents, dim, dtype](BodyContext& c, const Index& idx) {
          auto part = [&](size_t k) {
            Index at = idx;
            at[dim] = parts.size() == 1 ? idx[dim] : mod(idx[dim] - offsets[k], extents[k]);
            return emitCast(c, parts[k](c, at), dtype);
          };
          int v = part(parts.size() - 1);
          for (size_t k = parts.size() - 1; k-- > 0;) {
            int position = emitIndexExpr(c, idx[dim]);
            const IndexExpr& offset = offsets[k + 1];
            int bound = offset.isConstant() ? emitConstant(c, Argument(*offset.constant()), ScalarType::Int64)
                                            : emitIndexExpr(c, offset);
            int inside = emitMath(c, LoopOpCode::Lt, {position, bound});
            v = emitMath(c, LoopOpCode::Where, {inside, part(k), v});
          }
          return v;
        },
        cost);
  }

  Value lowerElementwise(const Node* n, LoopOpCode code) {
    int arity = loopOpArity(code);
    std::vector<Argument> args(n->args().begin(), n->args().end());
    KILN_CHECK(int(args.size()) == arity, "lowering: ", n->target(), " takes ", arity,
               " operands, got ", args.size());
    // Number operands take the dtype of the tensor operands they stand beside.
    ScalarType numberDtype = tensorTypeOf(n).dtype;
    for (size_t i = code == LoopOpCode::Where ? 1 : 0; i < args.size(); ++i)
      if (args[i].isNode()) numberDtype = valueOf(args[i].toNode()).dtype;
    std::vector<Loader> loaders;
    int64_t cost = 1;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].isNode()) {
        const Value& a = valueOf(args[i].toNode());
        loaders.push_back(a.load);
        cost += a.cost;
      } else {
        KILN_CHECK(args[i].isNumber(), "lowering: ", n->target(), " operand ", i,
                   " is neither a tensor nor a number");
        Argument value = args[i];
        ScalarType dtype = code == LoopOpCode::Where && i == 0 ? ScalarType::Bool : numberDtype;
        loaders.push_back([value, dtype](BodyContext& c, const Index&) {
          return emitConstant(c, value, dtype);
        });
        cost += 1;
      }
    }
    return derived(
        n, [loaders, code](BodyContext& c, const Index& idx) {
          std::vector<int> ops;
          for (const Loader& l : loaders) ops.push_back(l(c, idx));
          return emitMath(c, code, ops);
        },
        cost);
  }

  // log10(x) = log(x) / ln(10), in float for 16-bit floats.
  Value lowerLog10(const Node* n) {
    const Value& a = operand(n, 0, "self");
    Loader inner = a.load;
    ScalarType dtype = a.dtype;
    ScalarType compute = elementSize(dtype) == 2 ? ScalarType::Float32 : dtype;
    return derived(
        n, [inner, dtype, compute](BodyContext& c, const Index& idx) {
          int x = emitCast(c, inner(c, idx), compute);
          int lg = emitMath(c, LoopOpCode::Log, {x});
          int ln10 = emitConstant(c, Argument(std::log(10.0)), compute);
          return emitCast(c, emitMath(c, LoopOpCode::Div, {lg, ln10}), dtype);
        },
        a.cost + 4);
  }

  Value lowerBroadcast(const Node* n) {
    const Value& a = operand(n, 0, "a");
    // The shape argument is the result's sizes (its type, which may be symbolic).
    Shape shape = tensorTypeOf(n).sizes;
    std::vector<int64_t> bdims =
        intList(*argOf(n, 2, "broadcast_dimensions"), "broadcast_in_dim broadcast_dimensions");
    KILN_CHECK(bdims.size() == a.sizes.size(), "lowering: broadcast_in_dim of %", n->name(),
               " names ", bdims.size(), " dims for a ", a.sizes.size(), "-d input");
    Shape inSizes = a.sizes;
    return view(n, [bdims, inSizes, shape](const Index& idx) {
      Index in;
      for (size_t i = 0; i < bdims.size(); ++i) {
        size_t o = size_t(bdims[i]);
        in.push_back(inSizes[i] == IndexExpr(1) && shape.at(o) != IndexExpr(1) ? IndexExpr(0) : idx.at(o));
      }
      return in;
    });
  }

  // Reshape: input and output dims fall into groups of equal element counts (a split, a merge,
  // or one dim kept); within a group the output's row-major position is split again over the
  // input's sizes, so kept dims map to themselves and merges simplify to plain strides.
  Value lowerReshape(const Node* n) {
    const Value& a = operand(n, 0, "a");
    Shape inSizes = a.sizes;
    Shape outSizes = tensorTypeOf(n).sizes;
    if (inSizes == outSizes) return wholeView(n);
    // A reshape of no elements reads nothing: any index will do, and the row-major split
    // below would divide by the zero-size dims' products.
    if (std::find(inSizes.begin(), inSizes.end(), IndexExpr(0)) != inSizes.end())
      return view(n, [rank = inSizes.size()](const Index&) { return Index(rank, IndexExpr(0)); });
    std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> groups = reshapeGroups(
        inSizes, outSizes);
    return view(n, [inSizes, outSizes, groups](const Index& idx) {
      Index in(inSizes.size(), IndexExpr(0));
      for (const auto& [ins, outs] : groups) {
        IndexExpr flat(0), stride(1);
        for (size_t k = outs.size(); k-- > 0;) {
          flat = flat + idx.at(outs[k]) * stride;
          stride = stride * outSizes[outs[k]];
        }
        // Size-1 input dims are index 0; the first dim of size > 1 takes the rest undivided
        // (no mod: with a symbolic size, range facts could not remove it).
        size_t first = 0;
        while (first + 1 < ins.size() && inSizes[ins[first]] == IndexExpr(1)) ++first;
        stride = IndexExpr(1);
        for (size_t k = ins.size(); k-- > 0;) {
          if (inSizes[ins[k]] == IndexExpr(1) && k != first) continue; // stays 0
          IndexExpr e = floorDiv(flat, stride);
          in[ins[k]] = k == first ? e : mod(e, inSizes[ins[k]]);
          stride = stride * inSizes[ins[k]];
        }
      }
      return in;
    });
  }

  // Groups of (input dims, output dims) with equal products, in order; one group of every dim
  // when the sizes have zeros or do not pair up. Symbolic sizes are compared at a probe value
  // of their symbols (which side to extend), and a group is kept only when its products are
  // equal as expressions; otherwise one group of every dim (the general row-major mapping,
  // right for every size).
  static std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> reshapeGroups(
      const Shape& inShape, const Shape& outShape) {
    std::map<std::string, int64_t> probe;
    for (const Shape* shape : {&inShape, &outShape})
      for (const IndexExpr& s : *shape)
        for (const std::string& v : s.variables()) probe[v] = 1009; // a prime no static size is
    std::vector<int64_t> inSizes, outSizes;
    for (const IndexExpr& s : inShape) inSizes.push_back(s.evaluate(probe));
    for (const IndexExpr& s : outShape) outSizes.push_back(s.evaluate(probe));
    std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> groups;
    auto single = [&] {
      std::pair<std::vector<size_t>, std::vector<size_t>> all;
      for (size_t d = 0; d < inSizes.size(); ++d) all.first.push_back(d);
      for (size_t d = 0; d < outSizes.size(); ++d) all.second.push_back(d);
      return std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>>{all};
    };
    for (int64_t s : inSizes)
      if (s == 0) return single();
    size_t i = 0, j = 0;
    while (i < inSizes.size() || j < outSizes.size()) {
      std::pair<std::vector<size_t>, std::vector<size_t>> g;
      int64_t pin = 1, pout = 1;
      if (i < inSizes.size()) pin *= inSizes[g.first.emplace_back(i++)];
      if (j < outSizes.size()) pout *= outSizes[g.second.emplace_back(j++)];
      while (pin != pout) {
        if (pin < pout && i < inSizes.size()) {
          pin *= inSizes[g.first.emplace_back(i++)];
        } else if (pout < pin && j < outSizes.size()) {
          pout *= outSizes[g.second.emplace_back(j++)];
        } else {
          return single();
        }
      }
      IndexExpr symIn(1), symOut(1);
      for (size_t d : g.first) symIn = symIn * inShape[d];
      for (size_t d : g.second) symOut = symOut * outShape[d];
      if (symIn != symOut) return single();
      groups.push_back(std::move(g));
    }
    return groups;
  }

  // The reduced dims of a reduction node (its `dims` argument, or every dim for None).
  std::vector<bool> reducedDims(const Node* n, const Value& in) {
    size_t rank = in.sizes.size();
    const Argument* dimsArg = argOf(n, 1, n->target() == "prims.argmax" ||
                                                  n->target() == "prims.argmin"
                                              ? "dim"
                                              : "dims");
    std::vector<bool> reduced(rank, false);
    if (!dimsArg || dimsArg->isNone()) {
      reduced.assign(rank, true);
      return reduced;
    }
    std::vector<int64_t> dims = dimsArg->kind() == Argument::Kind::Int
                                    ? std::vector<int64_t>{dimsArg->toInt()}
                                    : intList(*dimsArg, "reduction dims");
    for (int64_t d : dims) {
      int64_t w = d < 0 ? d + int64_t(rank) : d;
      KILN_CHECK(w >= 0 && w < int64_t(rank), "lowering: reduction dim ", d, " out of range");
      reduced[size_t(w)] = true;
    }
    return reduced;
  }

  // A Reduction buffer of `kind` over the reduced dims of n's input (the input's loader
  // inlined in its body, values cast to `valueDtype`); returns the buffer's name.
  // The element a reduction body reduces: from the input element x, the full index and the
  // index of the output element (the kept dims).
  using ReducedValue = std::function<int(BodyContext&, int x, const Index& kept)>;

  std::string reductionBuffer(const Node* n, ReductionKind kind, ScalarType valueDtype,
                              ScalarType bufferDtype, const ReducedValue& transform = {}) {
    const Value& in = operand(n, 0, "inp");
    std::vector<bool> reduced = reducedDims(n, in);
    Shape keptSizes, reducedSizes;
    for (size_t d = 0; d < reduced.size(); ++d)
      (reduced[d] ? reducedSizes : keptSizes).push_back(in.sizes[d]);
    // The reduced dims, as loops: merged where their loads allow (below).
    std::vector<Shape> loops;
    for (const IndexExpr& size : reducedSizes) loops.push_back({size});
    auto build = [&](const std::vector<Shape>& groups) {
      Reduction red;
      red.kind = kind;
      BodyContext c;
      red.ranges = iterVars("i", keptSizes, c.facts);
      Shape extents;
      for (const Shape& g : groups) extents.push_back(product(g));
      red.reductionRanges = iterVars("r", extents, c.facts);
      // Each reduced dim's index: its loop's variable split by the sizes of the dims after it
      // in the same loop.
      std::vector<IndexExpr> reducedIndex;
      for (size_t l = 0; l < groups.size(); ++l) {
        IndexExpr var = IndexExpr::var("r" + std::to_string(l));
        if (groups[l].size() == 1) {
          reducedIndex.push_back(var);
          continue;
        }
        for (size_t g = 0; g < groups[l].size(); ++g) {
          // The product of the sizes after this one in the loop (sizes in a merged group
          // are nonzero).
          Shape after(groups[l].begin() + long(g) + 1, groups[l].end());
          reducedIndex.push_back(mod(floorDiv(var, product(after)), groups[l][g]));
        }
      }
      Index idx;
      size_t k = 0, r = 0;
      for (bool isReduced : reduced)
        idx.push_back(isReduced ? reducedIndex[r++] : IndexExpr::var("i" + std::to_string(k++)));
      int x = emitCast(c, in.load(c, idx), valueDtype);
      if (transform) x = transform(c, x, loopVars("i", keptSizes.size()));
      c.body.reduce(x);
      red.body = std::move(c.body);
      return red;
    };
    Reduction red = build(loops);
    // Adjacent reduced dims become one loop when every load's index stays affine in it (the
    // dims are contiguous in memory for all of them: a mean over H and W of an NCHW or NHWC
    // tensor): one longer loop, which the code generator's column order and vector loops take.
    bool empty = std::count(reducedSizes.begin(), reducedSizes.end(), IndexExpr(0)) > 0;
    for (size_t l = empty ? 0 : loops.size(); l-- > 1;) {
      std::vector<Shape> merged = loops;
      merged[l - 1].insert(merged[l - 1].end(), merged[l].begin(), merged[l].end());
      merged.erase(merged.begin() + long(l));
      Reduction candidate = build(merged);
      if (divisionsIn(candidate.body) == divisionsIn(red.body)) {
        loops = std::move(merged);
        red = std::move(candidate);
      }
    }
    const Shape& outSizes = tensorTypeOf(n).sizes;
    // The same reduction computed before (a layer norm's mean and its variance's mean) is
    // that buffer.
    for (const Buffer& b : program_.buffers)
      if (const auto* other = std::get_if<Reduction>(&b.computation))
        if (*other == red && b.dtype == bufferDtype && b.sizes == outSizes) return b.name;
    std::string name = freshName();
    program_.buffers.push_back(Buffer{name, bufferDtype, outSizes, std::move(red), "", {}});
    return name;
  }

  // How many floordiv and mod nodes the indices of the body's loads and index values hold.
  static int64_t divisionsIn(const LoopBody& body) {
    std::function<int64_t(const IndexExpr&)> count = [&](const IndexExpr& e) {
      int64_t k = e.kind() == IndexExpr::Kind::FloorDiv || e.kind() == IndexExpr::Kind::Mod;
      for (const IndexExpr& o : e.operands()) k += count(o);
      return k;
    };
    int64_t total = 0;
    for (const LoopOp& op : body.ops)
      if (op.code == LoopOpCode::Load || op.code == LoopOpCode::IndexExpr) total += count(op.index);
    return total;
  }

  Value lowerReduction(const Node* n, ReductionKind kind) {
    const TensorType& t = tensorTypeOf(n);
    const Value& in = operand(n, 0, "inp");
    std::vector<bool> reduced = reducedDims(n, in);
    bool any = false;
    for (bool b : reduced) any |= b;
    const Shape& sizes = t.sizes;
    bool isArg = kind == ReductionKind::ArgMax || kind == ReductionKind::ArgMin;
    if (!any && !isArg) {
      // No dim reduced: every output element is its input element.
      Loader inner = in.load;
      ScalarType dtype = t.dtype;
      return derived(
          n, [inner, dtype](BodyContext& c, const Index& idx) {
            return emitCast(c, inner(c, idx), dtype);
          },
          in.cost + 1);
    }
    ScalarType valueDtype = isArg ? in.dtype : t.dtype;
    std::string name = reductionBuffer(n, kind, valueDtype, t.dtype);
    return bufferValue(name, t.dtype, sizes);
  }

  // var, for f32 and f64: two passes, mean = sum(x) / n, then with d = x - mean,
  // (sum(d^2) - sum(d)^2 / n) / max(0, n - correction); the scheduler puts both into one kernel (a reduction read by a
  // reduction) and both vectorize, unlike a Welford update. Other dtypes:
  // welford_var * n / max(0, n - correction).
  Value lowerVar(const Node* n) {
    const TensorType& t = tensorTypeOf(n);
    const Value& in = operand(n, 0, "inp");
    std::vector<bool> reduced = reducedDims(n, in);
    IndexExpr count(1);
    for (size_t d = 0; d < reduced.size(); ++d)
      if (reduced[d]) count = count * in.sizes[d];
    const Argument* corr = argOf(n, 2, "correction");
    double correction = !corr || corr->isNone()           ? 1.0
                        : corr->kind() == Argument::Kind::Float ? corr->toFloat()
                                                                : double(corr->toInt());
    const Shape& sizes = t.sizes;
    ScalarType dtype = t.dtype;
    // n as a value of `dtype` (a constant, or computed from the size symbols), and
    // max(0, n - correction).
    auto emitCount = [count, dtype](BodyContext& c) {
      if (auto k = count.constant()) return emitConstant(c, Argument(double(*k)), dtype);
      return emitCast(c, emitIndexExpr(c, count), dtype);
    };
    auto emitDenominator = [count, correction, dtype, emitCount](BodyContext& c) {
      if (auto k = count.constant())
        return emitConstant(c, Argument(std::max(0.0, double(*k) - correction)), dtype);
      int d = emitMath(c, LoopOpCode::Sub, {emitCount(c), emitConstant(c, Argument(correction), dtype)});
      return emitMath(c, LoopOpCode::Maximum, {d, emitConstant(c, Argument(0.0), dtype)});
    };
    if ((dtype == ScalarType::Float32 || dtype == ScalarType::Float64) && in.dtype == dtype) {
      std::string sum = reductionBuffer(n, ReductionKind::Sum, dtype, dtype);
      Shape strides = rowMajorStrides(sizes);
      auto deviation = [sum, strides, emitCount, dtype](BodyContext& c, int x, const Index& kept) {
        int total = emitLoad(c, sum, flatIndex(kept, strides), dtype);
        int mean = emitMath(c, LoopOpCode::Div, {total, emitCount(c)});
        return emitMath(c, LoopOpCode::Sub, {x, mean});
      };
      std::string deviations = reductionBuffer(n, ReductionKind::Sum, dtype, dtype, deviation);
      std::string squares = reductionBuffer(
          n, ReductionKind::Sum, dtype, dtype,
          [deviation](BodyContext& c, int x, const Index& kept) {
            int d = deviation(c, x, kept);
            return emitMath(c, LoopOpCode::Mul, {d, d});
          });
      Loader sq = bufferValue(squares, dtype, sizes).load;
      Loader dev = bufferValue(deviations, dtype, sizes).load;
      return derived(
          n, [sq, dev, emitCount, emitDenominator](BodyContext& c, const Index& idx) {
            // The corrected two-pass formula: sum(d^2) - sum(d)^2 / n removes the error
            // of the rounded mean.
            int d = dev(c, idx);
            int correctionTerm = emitMath(
                c, LoopOpCode::Div, {emitMath(c, LoopOpCode::Mul, {d, d}), emitCount(c)});
            int v = emitMath(c, LoopOpCode::Sub, {sq(c, idx), correctionTerm});
            return emitMath(c, LoopOpCode::Div, {v, emitDenominator(c)});
          },
          8);
    }
    std::string name = reductionBuffer(n, ReductionKind::WelfordVar, t.dtype, t.dtype);
    Value buf = bufferValue(name, t.dtype, sizes);
    if (correction == 0) return buf;
    Loader inner = buf.load;
    if (auto k = count.constant()) {
      double scale = double(*k) / std::max(0.0, double(*k) - correction);
      return derived(
          n, [inner, scale, dtype](BodyContext& c, const Index& idx) {
            int v = inner(c, idx);
            int s = emitConstant(c, Argument(scale), dtype);
            return emitMath(c, LoopOpCode::Mul, {v, s});
          },
          3);
    }
    // A symbolic n: the scale n / max(0, n - correction) is computed in f64 (n may not fit a
    // 16-bit float) and applied in f32 at least.
    ScalarType compute = dtype == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
    return derived(
        n, [inner, count, correction, dtype, compute](BodyContext& c, const Index& idx) {
          int cnt = emitCast(c, emitIndexExpr(c, count), ScalarType::Float64);
          int den = emitMath(c, LoopOpCode::Sub, {cnt, emitConstant(c, Argument(correction), ScalarType::Float64)});
          den = emitMath(c, LoopOpCode::Maximum, {den, emitConstant(c, Argument(0.0), ScalarType::Float64)});
          int scale = emitCast(c, emitMath(c, LoopOpCode::Div, {cnt, den}), compute);
          int v = emitMath(c, LoopOpCode::Mul, {emitCast(c, inner(c, idx), compute), scale});
          return emitCast(c, v, dtype);
        },
        8);
  }

  // ---- In-place writes (prims.copy_to) ----------------------------------------------------

  // The input or buffer owning the storage that `version` (a storage name) is a version of.
  std::string storageRoot(const std::string& version) const {
    auto it = versionRoot_.find(version);
    return it == versionRoot_.end() ? version : it->second;
  }

  // Row-major strides of a storage root: an input's own, a buffer's contiguous ones.
  Shape storageStrides(const std::string& root, const Shape& sizes) {
    if (const LoopInput* in = program_.findInput(root)) return in->strides;
    return rowMajorStrides(sizes);
  }

  // The storages (by root) a value's loader reads.
  std::set<std::string> readsOf(const Value& v) {
    BodyContext c;
    iterVars("i", v.sizes, c.facts);
    v.load(c, loopVars("i", v.sizes.size()));
    std::set<std::string> roots;
    for (const LoopOp& op : c.body.ops)
      if (op.code == LoopOpCode::Load) roots.insert(storageRoot(op.buffer));
    return roots;
  }

  // Every view of `root` loads through the root's current loader again.
  void refreshAliases(const Node* root) {
    const Value& r = values_.at(root);
    for (auto& [node, v] : values_) {
      if (v.aliasOf != root) continue;
      Loader inner = r.load;
      IndexMap map = v.aliasMap;
      v.load = [inner, map](BodyContext& c, const Index& idx) { return inner(c, map(idx)); };
      v.cost = r.cost;
      v.storage = v.aliasWhole ? r.storage : "";
    }
  }

  // Whether a node lowered before `now` is used after it (by a later node or the output).
  bool usedAfter(const Node* m, const Node* now) const {
    for (const Node* u : m->users())
      if (order_.at(u) > order_.at(now)) return true;
    return false;
  }

  // Write after read: values computed lazily from `root`'s storage that are still needed after
  // `now` are realized before the write, so they keep the values they were defined with.
  void snapshotReaders(const std::string& root, const Node* now) {
    std::set<const Node*> needed;
    for (const auto& [node, v] : values_)
      if (usedAfter(node, now)) needed.insert(v.aliasOf ? v.aliasOf : node);
    for (const Node* m : graph_.nodes()) {
      if (!needed.count(m)) continue;
      Value& v = values_.at(m);
      if (!v.storage.empty() || v.aliasOf || !readsOf(v).count(root)) continue;
      realize(v);
      refreshAliases(m);
    }
  }

  // The source of copy_to(a, b) at an index of a: b's element (b broadcasts to a's shape,
  // dims aligned at the right; a number is a constant), cast to a's dtype.
  Loader copySource(const Node* n, const Value& dst, int64_t& cost) {
    const Argument* srcArg = argOf(n, 1, "b");
    KILN_CHECK(srcArg && (srcArg->isNode() || srcArg->isNumber()),
               "lowering: prims.copy_to (%", n->name(), ") needs a tensor or number to copy");
    ScalarType dtype = dst.dtype;
    if (!srcArg->isNode()) {
      Argument value = *srcArg;
      cost = 1;
      return [value, dtype](BodyContext& c, const Index&) { return emitConstant(c, value, dtype); };
    }
    const Value& s = valueOf(srcArg->toNode());
    Shape srcSizes = s.sizes, dstSizes = dst.sizes;
    bool fits = srcSizes.size() <= dstSizes.size();
    for (size_t d = 0; fits && d < srcSizes.size(); ++d) {
      const IndexExpr& o = dstSizes[dstSizes.size() - srcSizes.size() + d];
      fits = srcSizes[d] == o || srcSizes[d] == IndexExpr(1);
    }
    KILN_CHECK(fits, "lowering: prims.copy_to (%", n->name(), ") copies a ",
               shapeString(srcSizes), " tensor into ", shapeString(dstSizes));
    Loader inner = s.load;
    cost = s.cost + 1;
    return [inner, srcSizes, dstSizes, dtype](BodyContext& c, const Index& idx) {
      Index in;
      for (size_t d = 0; d < srcSizes.size(); ++d)
        in.push_back(srcSizes[d] == IndexExpr(1) ? IndexExpr(0)
                                      : idx.at(dstSizes.size() - srcSizes.size() + d));
      return emitCast(c, inner(c, in), dtype);
    };
  }

  // copy_to returns its destination: the same view of the root, loading its current version.
  Value copyResult(const Value& dst, const Node* rootNode, const IndexMap& map) {
    const Value& r = values_.at(rootNode);
    Value result = dst;
    result.aliasOf = rootNode;
    result.aliasMap = map;
    result.aliasWhole = dst.aliasOf ? dst.aliasWhole : true;
    Loader inner = r.load;
    result.load = [inner, map](BodyContext& c, const Index& i) { return inner(c, map(i)); };
    result.storage = result.aliasWhole ? r.storage : "";
    result.cost = r.cost;
    return result;
  }

  // copy_to(a, b): b (cast to a's dtype) is written into a's elements, which are a view of a
  // root node's storage; the write becomes a pointwise buffer `into` that storage's current
  // version, and the root and all its views read the new version from then on. A write of the
  // whole of a root that is not in memory yet overwrites nothing: the root becomes b.
  Value lowerCopyTo(const Node* n) {
    const Node* dstNode = operandNode(n, 0, "a");
    const Value dst = valueOf(dstNode);
    const Node* rootNode = dst.aliasOf ? dst.aliasOf : dstNode;
    IndexMap map = dst.aliasOf ? dst.aliasMap : [](const Index& idx) { return idx; };
    int64_t srcCost = 1;
    Loader src = copySource(n, dst, srcCost);
    if ((!dst.aliasOf || dst.aliasWhole) && values_.at(rootNode).storage.empty()) {
      Value& r = values_.at(rootNode);
      r.load = src;
      r.cost = srcCost;
      if (r.cost > kRecomputeLimit) realize(r);
      refreshAliases(rootNode);
      return copyResult(dst, rootNode, map);
    }
    if (values_.at(rootNode).storage.empty()) {
      realize(values_.at(rootNode));
      refreshAliases(rootNode);
    }
    std::string base = values_.at(rootNode).storage;
    std::string root = storageRoot(base);
    Shape strides = storageStrides(root, values_.at(rootNode).sizes);

    Pointwise pw;
    BodyContext c;
    pw.ranges = iterVars("i", dst.sizes, c.facts);
    Index idx = loopVars("i", dst.sizes.size());
    pw.intoIndex = simplify(flatIndex(map(idx), strides), c.facts);
    // Eager refuses a write where two elements share a memory location (a broadcast view or
    // input); so does the compiled program. A write of no elements overlaps nothing.
    bool empty = std::find(dst.sizes.begin(), dst.sizes.end(), IndexExpr(0)) != dst.sizes.end();
    for (size_t d = 0; d < dst.sizes.size() && !empty; ++d) {
      if (dst.sizes[d].constant().value_or(kMinSizeSymbol) < 2) continue;
      std::map<std::string, IndexExpr> one{{"i" + std::to_string(d), IndexExpr(1)}};
      if (simplify(pw.intoIndex.substitute(one) - pw.intoIndex, c.facts).constant() ==
          std::optional<int64_t>(0))
        throw Error("unsupported operation: more than one element of the written-to tensor "
                    "refers to a single memory location. Please clone() the tensor before "
                    "performing the operation. (prims.copy_to %" + n->name() + " into " +
                    scalarTypeName(dst.dtype) + shapeString(dst.sizes) + ")");
    }

    snapshotReaders(root, n);
    BodyContext body = c;
    int x = src(body, idx);
    // The storage may be read only at the element being written (an element-wise update);
    // a source reading it elsewhere (x.add_(x.flip(0))) is computed into a buffer first.
    bool elementwise = true;
    for (const LoopOp& op : body.body.ops)
      if (op.code == LoopOpCode::Load && storageRoot(op.buffer) == root)
        elementwise &= op.buffer == base && op.index == pw.intoIndex;
    if (!elementwise) {
      Value copy = derived(n, src, srcCost);
      copy.sizes = dst.sizes;
      copy.dtype = dst.dtype;
      Value tmp = bufferValue(realize(copy), dst.dtype, dst.sizes);
      body = c;
      x = tmp.load(body, idx);
    }
    body.body.store(x);
    pw.body = std::move(body.body);
    pw.into = base;
    std::string name = freshName();
    program_.buffers.push_back(Buffer{name, dst.dtype, dst.sizes, std::move(pw), "", {}});
    versionRoot_[name] = root;

    // The root (and every view of it) now reads the new version.
    Value& r = values_.at(rootNode);
    ScalarType dtype = r.dtype;
    r.storage = name;
    r.cost = 1;
    r.load = [name, strides, dtype](BodyContext& c, const Index& i) {
      return emitLoad(c, name, flatIndex(i, strides), dtype);
    };
    refreshAliases(rootNode);
    return copyResult(dst, rootNode, map);
  }

  const Graph& graph_;
  LoopProgram program_;
  std::set<std::string> names_;
  int counter_ = 0;
  std::unordered_map<const Node*, Value> values_;
  std::unordered_map<const Node*, std::vector<Value>> tuples_; // ops with several results
  std::unordered_map<const Node*, size_t> order_;        // position in the graph
  // ---------------------------------------------------------------------------------------
  // Indexing ops (Core ATen, lowered directly: they have no prims decomposition). A read
  // through an index tensor is an `indirect` op binding an index variable that the load's
  // index uses; a write through one is an in-place pointwise buffer whose index uses it (serial,
  // see LoopIR.h Pointwise). The loaders compose like the prims': a gather of a log_softmax
  // reads the log_softmax's expression at the gathered element (cross_entropy in one kernel).

  // Binds an index variable to the integer value `value` checked against `size`; an equal
  // check made before in this body is reused. Returns the variable.
  // (`size` may be an expression over size symbols: the variable is then bounded below only.)
  static IndexExpr emitIndirect(BodyContext& c, int value, const IndexExpr& size, bool wrap,
                                const std::string& error) {
    int count = 0;
    for (const LoopOp& op : c.body.ops) {
      if (op.code != LoopOpCode::Indirect) continue;
      ++count;
      if (op.operands[0] == value && op.index == size && op.wrap == wrap && op.error == error)
        return IndexExpr::var(op.var);
    }
    std::string var = "x" + std::to_string(count);
    c.body.indirect(value, size, var, wrap, error);
    addSymbolFacts(c.facts, size);
    c.facts[var] = VarRange{0, size.constant()};
    return IndexExpr::var(var);
  }

  static std::string boundsError(const char* type, int64_t dim) {
    return std::string(type) + ": index {index} is out of bounds for dimension " + std::to_string(dim) +
           " with size {size}";
  }

  // The sizes of an indexing op's operand: constants or expressions over size symbols (the
  // indexing lowerings below take either; pooling needs static spatial sizes: spatialSizes).
  static const Shape& ss(const Value& v) { return v.sizes; }

  static int64_t normalizedDim(int64_t dim, size_t rank, const std::string& what) {
    int64_t r = std::max<int64_t>(int64_t(rank), 1);
    KILN_CHECK(dim >= -r && dim < r, "lowering: ", what, ": dim ", dim, " out of range for rank ", rank);
    return dim < 0 ? dim + r : dim;
  }

  int64_t intArg(const Node* n, size_t pos, std::string_view name, std::optional<int64_t> dflt = {}) {
    const Argument* a = argOf(n, pos, name);
    if ((!a || a->isNone()) && dflt) return *dflt;
    KILN_CHECK(a && a->kind() == Argument::Kind::Int, "lowering: ", n->target(), " needs a static int ", name);
    return a->toInt();
  }

  bool boolArg(const Node* n, size_t pos, std::string_view name, bool dflt) {
    const Argument* a = argOf(n, pos, name);
    if (!a || a->isNone()) return dflt;
    KILN_CHECK(a->kind() == Argument::Kind::Bool, "lowering: ", n->target(), " needs a bool ", name);
    return a->toBool();
  }

  // cumsum / cumprod(self, dim, *, dtype): an extern scan (codegen: a running value carried
  // along `dim`, parallel over the other dims) of the operand converted to the computation
  // dtype (float for 16-bit floats, as eager accumulates them), its result converted back
  // lazily. The operand's producers fuse into the one pointwise buffer the scan reads.
  Value lowerScan(const Node* n, bool prod) {
    const char* op = prod ? "cumprod" : "cumsum";
    const TensorType& t = tensorTypeOf(n);
    KILN_CHECK(t.dtype != ScalarType::Bool, "lowering: aten.", op, " (%",
               n->name(), ") of ", scalarTypeShortName(t.dtype), " has no loop lowering");
    Value& self = operand(n, 0, "self");
    ScalarType result = t.dtype;
    ScalarType compute =
        result == ScalarType::Float16 || result == ScalarType::BFloat16 ? ScalarType::Float32 : result;
    if (self.sizes.empty()) { // a 0-d tensor is its own scan
      Loader in = self.load;
      return derived(n, [in, result](BodyContext& c, const Index& idx) { return emitCast(c, in(c, idx), result); },
                     self.cost + 1);
    }
    int64_t dim = normalizedDim(intArg(n, 1, "dim"), self.sizes.size(), op);
    std::string src = contiguousOperand(self, compute);
    std::string name = freshName();
    program_.buffers.push_back(Buffer{name, compute, t.sizes, Extern{op, {src}, {{"dim", dim}}, {}}, "", {}});
    Value r = bufferValue(name, compute, t.sizes);
    if (compute == result) return r;
    Loader scanned = r.load;
    return derived(
        n, [scanned, result](BodyContext& c, const Index& idx) { return emitCast(c, scanned(c, idx), result); }, 2);
  }

  // An input or buffer holding v's elements contiguously in `dtype`: v's own storage when it is
  // one, else a pointwise buffer computing it (v itself is realized when only a view of it or
  // no cast stands in the way, so its other readers load it too).
  std::string contiguousOperand(Value& v, ScalarType dtype) {
    if (v.dtype == dtype && !v.storage.empty()) {
      if (const Buffer* b = program_.findBuffer(v.storage); b && !b->writesInto()) return v.storage;
      if (const LoopInput* in = program_.findInput(v.storage); in && in->strides == rowMajorStrides(in->sizes))
        return v.storage;
    }
    if (v.dtype == dtype && v.storage.empty() && !v.aliasOf) return realize(v);
    Value copy;
    copy.dtype = dtype;
    copy.sizes = v.sizes;
    Loader in = v.load;
    copy.load = [in, dtype](BodyContext& c, const Index& idx) { return emitCast(c, in(c, idx), dtype); };
    return realize(copy);
  }

  Value lowerIndexing(const Node* n, const std::string& op) {
    if (op == "gather") return lowerGather(n);
    if (op == "index_select") return lowerIndexSelect(n);
    if (op == "embedding") return lowerEmbedding(n);
    if (op == "index.Tensor") return lowerAdvancedIndex(n);
    if (op == "index_put") return lowerIndexPut(n);
    if (op == "scatter.src" || op == "scatter.value" || op == "scatter_add") return lowerScatter(n, op);
    if (op == "embedding_dense_backward") return lowerEmbeddingBackward(n);
    throw NotImplementedError("lowering: aten." + op + " (%" + n->name() + ") has no loop lowering");
  }

  // gather(self, dim, index): out[p] = self[p with p[dim] = index[p]].
  Value lowerGather(const Node* n) {
    const Value& self = operand(n, 0, "self");
    const Value& index = operand(n, 2, "index");
    int64_t dim = normalizedDim(intArg(n, 1, "dim"), self.sizes.size(), "gather");
    IndexExpr size = self.sizes.empty() ? IndexExpr(1) : self.sizes[size_t(dim)];
    Loader in = self.load, at = index.load;
    std::string error = boundsError("RuntimeError", dim);
    bool scalar = self.sizes.empty();
    return derived(
        n, [in, at, dim, size, error, scalar](BodyContext& c, const Index& idx) {
          IndexExpr x = emitIndirect(c, at(c, idx), size, false, error);
          Index src = idx;
          if (!scalar) src[size_t(dim)] = x;
          return in(c, src);
        },
        self.cost + index.cost + 1);
  }

  // index_select(self, dim, index): out[p] = self[p with p[dim] = index[p[dim]]].
  Value lowerIndexSelect(const Node* n) {
    const Value& self = operand(n, 0, "self");
    const Value& index = operand(n, 2, "index");
    int64_t dim = normalizedDim(intArg(n, 1, "dim"), self.sizes.size(), "index_select");
    IndexExpr size = self.sizes.empty() ? IndexExpr(1) : self.sizes[size_t(dim)];
    // Eager's CPU paths word (and type) the error differently (runtime/cpu/IndexKernels.cpp).
    // (A symbolic numel is never 0: symbols are >= 2.)
    bool runtimeError = self.sizes.size() > 1 && (dim == 1 || product(self.sizes) == IndexExpr(0));
    std::string error = runtimeError ? "RuntimeError: INDICES element is out of DATA bounds, id={index} axis_dim={size}"
                                     : "IndexError: index out of range in self";
    Loader in = self.load, at = index.load;
    bool scalarIndex = index.sizes.empty(), scalar = self.sizes.empty();
    return derived(
        n, [in, at, dim, size, error, scalarIndex, scalar](BodyContext& c, const Index& idx) {
          Index position = scalarIndex || scalar ? Index{} : Index{idx[size_t(dim)]};
          IndexExpr x = emitIndirect(c, at(c, position), size, false, error);
          Index src = idx;
          if (!scalar) src[size_t(dim)] = x;
          return in(c, src);
        },
        self.cost + index.cost + 1);
  }

  // embedding(weight, indices): out[p..., j] = weight[indices[p...], j].
  Value lowerEmbedding(const Node* n) {
    const Value& weight = operand(n, 0, "weight");
    const Value& indices = operand(n, 1, "indices");
    KILN_CHECK(weight.sizes.size() == 2, "lowering: embedding needs a 2-d weight");
    IndexExpr rows = weight.sizes[0];
    size_t k = indices.sizes.size();
    Loader in = weight.load, at = indices.load;
    return derived(
        n, [in, at, rows, k](BodyContext& c, const Index& idx) {
          Index position(idx.begin(), idx.begin() + long(k));
          IndexExpr x = emitIndirect(c, at(c, position), rows, false, "IndexError: index out of range in self");
          return in(c, {x, idx[k]});
        },
        weight.cost + indices.cost + 1);
  }

  // The index tensors of index / index_put (None for a dim taken whole) and where the
  // broadcast index dims go in the result: at the first indexed dim when the indexed dims are
  // adjacent, else first (NumPy's rule, as eager's AdvancedIndex).
  struct AdvancedIndexing {
    std::vector<const Value*> indices; // per self dim (nullptr: not indexed)
    Shape broadcast;                   // the index tensors' broadcast shape
    size_t first = 0;                  // where the broadcast dims go in the result
    std::vector<size_t> kept;          // self's dims taken whole, in order
  };

  AdvancedIndexing advancedIndexing(const Node* n, const Value& self, size_t pos) {
    const Argument* list = argOf(n, pos, "indices");
    KILN_CHECK(list && list->isSequence(), "lowering: ", n->target(), " needs a list of indices");
    AdvancedIndexing a;
    a.indices.assign(ss(self).size(), nullptr);
    KILN_CHECK(list->items().size() <= ss(self).size(), "lowering: ", n->target(), ": too many indices");
    std::vector<size_t> indexed;
    for (size_t d = 0; d < list->items().size(); ++d) {
      const Argument& x = list->items()[d];
      if (x.isNone()) continue;
      KILN_CHECK(x.isNode(), "lowering: ", n->target(), ": an index is a tensor or None");
      const Value& v = valueOf(x.toNode());
      KILN_CHECK(!isFloatingType(v.dtype) && v.dtype != ScalarType::Bool, "lowering: ", n->target(),
                 ": only integer index tensors lower (boolean masks run eagerly)");
      a.indices[d] = &v;
      indexed.push_back(d);
      // Broadcast right-aligned.
      const Shape& s = ss(v);
      Shape& b = a.broadcast;
      if (s.size() > b.size()) b.insert(b.begin(), s.size() - b.size(), IndexExpr(1));
      for (size_t i = 0; i < s.size(); ++i) {
        IndexExpr& t = b[b.size() - s.size() + i];
        // (Size symbols are >= 2: a symbolic dim broadcasts only against 1 or itself.)
        KILN_CHECK(t == IndexExpr(1) || s[i] == IndexExpr(1) || t == s[i], "lowering: ", n->target(),
                   ": index shapes do not broadcast");
        if (t == IndexExpr(1)) t = s[i];
      }
    }
    KILN_CHECK(!indexed.empty(), "lowering: ", n->target(), " without an index tensor");
    bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
    a.first = adjacent ? indexed.front() : 0;
    for (size_t d = 0; d < ss(self).size(); ++d)
      if (!a.indices[d]) a.kept.push_back(d);
    return a;
  }

  // The self index of result position `idx` (result dims: kept dims before `first`, the
  // broadcast dims, the remaining kept dims), binding an index variable per indexed dim.
  static Index advancedSource(BodyContext& c, const AdvancedIndexing& a, const std::vector<Loader>& loaders,
                              const std::vector<Shape>& indexSizes, const Shape& selfSizes,
                              const Index& idx) {
    size_t nb = a.broadcast.size();
    Index src(selfSizes.size(), IndexExpr(0));
    size_t k = 0;
    for (size_t d : a.kept) {
      size_t at = d < a.first ? k : k + nb;
      src[d] = idx.at(at);
      ++k;
    }
    // The broadcast dims sit after the kept dims before `first`.
    size_t before = 0;
    for (size_t d : a.kept) before += d < a.first;
    for (size_t d = 0; d < selfSizes.size(); ++d) {
      if (!a.indices[d]) continue;
      const Shape& s = indexSizes[d];
      Index position;
      for (size_t i = 0; i < s.size(); ++i)
        position.push_back(s[i] == IndexExpr(1) ? IndexExpr(0) : idx.at(before + nb - s.size() + i));
      src[d] = emitIndirect(c, loaders[d](c, position), selfSizes[d], true, boundsError("IndexError", int64_t(d)));
    }
    return src;
  }

  // index.Tensor(self, indices) with integer index tensors.
  Value lowerAdvancedIndex(const Node* n) {
    const Value& self = operand(n, 0, "self");
    AdvancedIndexing a = advancedIndexing(n, self, 1);
    std::vector<Loader> loaders(ss(self).size());
    std::vector<Shape> indexSizes(ss(self).size());
    int64_t cost = self.cost + 1;
    for (size_t d = 0; d < ss(self).size(); ++d)
      if (a.indices[d]) {
        loaders[d] = a.indices[d]->load;
        indexSizes[d] = ss(*a.indices[d]);
        cost += a.indices[d]->cost + 1;
      }
    Loader in = self.load;
    Shape selfSizes = ss(self);
    return derived(
        n, [in, a, loaders, indexSizes, selfSizes](BodyContext& c, const Index& idx) {
          return in(c, advancedSource(c, a, loaders, indexSizes, selfSizes, idx));
        },
        cost);
  }

  // A fresh buffer holding `v` (never an alias of an input or of v's storage): the base an
  // out-of-place scatter writes into.
  std::string freshCopy(const Value& v) {
    Value copy = v;
    copy.storage.clear();
    copy.aliasOf = nullptr;
    return realize(copy);
  }

  // An in-place write of `value(c, idx, dst)` over `ranges` into the storage `base` (a fresh
  // buffer), at the flat index `dst(c, idx)` built from indirect variables; the result is the
  // new version of the storage, with `sizes`.
  Value scatterInto(const std::string& base, ScalarType dtype, const Shape& sizes, const Shape& ranges,
                    bool accumulate,
                    const std::function<IndexExpr(BodyContext&, const Index&)>& dst,
                    const std::function<int(BodyContext&, const Index&)>& value) {
    Pointwise pw;
    BodyContext c;
    pw.ranges = iterVars("i", ranges, c.facts);
    Index idx = loopVars("i", ranges.size());
    pw.intoIndex = simplify(dst(c, idx), c.facts);
    c.body.store(emitCast(c, value(c, idx), dtype));
    pw.body = std::move(c.body);
    pw.into = base;
    pw.accumulate = accumulate;
    std::string name = freshName();
    program_.buffers.push_back(Buffer{name, dtype, ranges, std::move(pw), "", {}});
    versionRoot_[name] = storageRoot(base);
    return bufferValue(name, dtype, sizes);
  }

  // index_put(self, indices, values, accumulate): a copy of self with the indexed elements
  // replaced by (or, accumulating, incremented by) values broadcast to the indexed shape.
  Value lowerIndexPut(const Node* n) {
    const Value& self = operand(n, 0, "self");
    const Value& values = operand(n, 2, "values");
    bool accumulate = boolArg(n, 3, "accumulate", false);
    AdvancedIndexing a = advancedIndexing(n, self, 1);
    // The indexed shape: what index(self, indices) would give.
    Shape ranges;
    size_t before = 0;
    for (size_t d : a.kept) before += d < a.first;
    for (size_t k = 0; k < before; ++k) ranges.push_back(ss(self)[a.kept[k]]);
    ranges.insert(ranges.end(), a.broadcast.begin(), a.broadcast.end());
    for (size_t k = before; k < a.kept.size(); ++k) ranges.push_back(ss(self)[a.kept[k]]);
    KILN_CHECK(ss(values).size() <= ranges.size(), "lowering: index_put: values of rank ",
               ss(values).size(), " for an indexed shape of rank ", ranges.size());
    std::vector<Loader> loaders(ss(self).size());
    std::vector<Shape> indexSizes(ss(self).size());
    for (size_t d = 0; d < ss(self).size(); ++d)
      if (a.indices[d]) {
        loaders[d] = a.indices[d]->load;
        indexSizes[d] = ss(*a.indices[d]);
      }
    Shape selfSizes = ss(self), strides = rowMajorStrides(ss(self));
    Shape valueSizes = ss(values);
    Loader valueLoad = values.load;
    std::string base = freshCopy(self);
    return scatterInto(
        base, self.dtype, ss(self), ranges, accumulate,
        [&](BodyContext& c, const Index& idx) {
          return flatIndex(advancedSource(c, a, loaders, indexSizes, selfSizes, idx), strides);
        },
        [&](BodyContext& c, const Index& idx) {
          Index at; // values broadcast to the indexed shape, right-aligned
          for (size_t i = 0; i < valueSizes.size(); ++i)
            at.push_back(valueSizes[i] == IndexExpr(1) ? IndexExpr(0) : idx[idx.size() - valueSizes.size() + i]);
          return valueLoad(c, at);
        });
  }

  // scatter(self, dim, index, src | value) and scatter_add: a copy of self with
  // out[p with p[dim] = index[p]] = src[p] (added for scatter_add) over index's shape.
  Value lowerScatter(const Node* n, const std::string& op) {
    const Value& self = operand(n, 0, "self");
    const Value& index = operand(n, 2, "index");
    int64_t dim = normalizedDim(intArg(n, 1, "dim"), ss(self).size(), op);
    IndexExpr size = ss(self).empty() ? IndexExpr(1) : ss(self)[size_t(dim)];
    Shape strides = rowMajorStrides(ss(self));
    Loader at = index.load, value;
    ScalarType dtype = self.dtype;
    const Argument* v = argOf(n, 3, op == "scatter.value" ? "value" : "src");
    KILN_CHECK(v && (v->isNumber() || v->isNode()), "lowering: ", op, " needs a tensor or number source");
    // (Captured graphs may call scatter.src with a number: the capture wraps it.)
    if (v->isNumber()) {
      Argument number = *v;
      value = [number, dtype](BodyContext& c, const Index&) { return emitConstant(c, number, dtype); };
    } else {
      value = valueOf(v->toNode()).load;
    }
    std::string error = boundsError("RuntimeError", dim);
    bool scalar = ss(self).empty();
    std::string base = freshCopy(self);
    return scatterInto(
        base, dtype, ss(self), ss(index), op == "scatter_add",
        [&](BodyContext& c, const Index& idx) {
          IndexExpr x = emitIndirect(c, at(c, idx), size, false, error);
          if (scalar) return IndexExpr(0);
          Index p = idx;
          p[size_t(dim)] = x;
          return flatIndex(p, strides);
        },
        value);
  }

  // embedding_dense_backward(grad, indices, num_weights, padding_idx, False): zeros, then
  // grad_weight[indices[p], j] += grad[p, j] for every p whose index is not padding_idx.
  Value lowerEmbeddingBackward(const Node* n) {
    const Value& grad = operand(n, 0, "grad_output");
    const Value& indices = operand(n, 1, "indices");
    int64_t rows = intArg(n, 2, "num_weights");
    int64_t padding = intArg(n, 3, "padding_idx", -1);
    KILN_CHECK(!boolArg(n, 4, "scale_grad_by_freq", false),
               "lowering: embedding_dense_backward with scale_grad_by_freq runs eagerly");
    const TensorType& t = tensorTypeOf(n);
    Shape sizes = t.sizes;
    KILN_CHECK(sizes.size() == 2 && sizes[0] == IndexExpr(rows), "lowering: embedding_dense_backward: unexpected result shape");
    IndexExpr width = sizes[1];
    ScalarType dtype = t.dtype;
    Value zeros = derived(
        n, [dtype](BodyContext& c, const Index&) { return emitConstant(c, Argument(int64_t(0)), dtype); }, 1);
    std::string base = freshCopy(zeros);
    Shape ranges = ss(indices);
    ranges.push_back(width);
    size_t k = ss(indices).size();
    Loader at = indices.load, g = grad.load;
    return scatterInto(
        base, dtype, sizes, ranges, true,
        [&](BodyContext& c, const Index& idx) {
          Index position(idx.begin(), idx.begin() + long(k));
          IndexExpr x = emitIndirect(c, at(c, position), rows, false, "IndexError: index out of range in self");
          return x * width + idx[k];
        },
        [&](BodyContext& c, const Index& idx) {
          int v = emitCast(c, g(c, idx), dtype);
          if (padding < 0) return v;
          // padding_idx is normalized by the caller (nn.Embedding); rows of it get no gradient.
          Index position(idx.begin(), idx.begin() + long(k));
          int i = emitCast(c, at(c, position), ScalarType::Int64);
          int pad = emitConstant(c, Argument(padding), ScalarType::Int64);
          int skip = emitMath(c, LoopOpCode::Eq, {i, pad});
          int zero = emitConstant(c, Argument(int64_t(0)), dtype);
          return emitMath(c, LoopOpCode::Where, {skip, zero, v});
        });
  }

  std::unordered_map<std::string, std::string> versionRoot_; // in-place buffer -> root storage

  // ---- Pooling ----------------------------------------------------------------------------
  // max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (values,
  // indices): each output reads its window's kh*kw elements, unrolled in row-major order, with
  // eager's rule (runtime/cpu/PoolingKernels.cpp): an element replaces the best so far when it
  // is greater or NaN; the index is the first valid position's until one does. Window rows or
  // columns that can fall outside the input (padding, ceil_mode) are masked; the others are
  // proven inside by the output's range and read unmasked.
  std::vector<Value> lowerMaxPool2d(const Node* n) {
    const Value& self = operand(n, 0, "self");
    KILN_CHECK(n->meta.type && n->meta.type->isTuple() && n->meta.type->elements().size() == 2,
               "lowering: max_pool2d_with_indices (%", n->name(), ") needs its (values, indices) type");
    const Shape& outSizes = n->meta.type->elements()[0].tensor().sizes;
    PoolWindow w = poolWindow(n, 1, self.sizes, outSizes);
    ScalarType dtype = self.dtype;
    Loader in = self.load;
    int64_t cost = self.cost * w.kernel[0] * w.kernel[1] + 6 * w.kernel[0] * w.kernel[1];
    auto make = [&](bool indices) {
      Value v;
      v.dtype = indices ? ScalarType::Int64 : dtype;
      v.sizes = outSizes;
      v.cost = cost;
      v.load = [in, w, dtype, indices](BodyContext& c, const Index& idx) {
        return emitMaxWindow(c, in, w, dtype, idx, indices);
      };
      return v;
    };
    return {make(false), make(true)};
  }

  struct PoolWindow {
    std::array<int64_t, 2> kernel, stride, padding, dilation, in, out;
  };

  // The sizes of a pooling operand (3-d or 4-d) whose last two (spatial) dims are static: the
  // window is unrolled over them. The dims before (batch, channels) pass through the loaders'
  // indices and may be size symbols; they are 0 here.
  static std::vector<int64_t> spatialSizes(const Node* n, const Shape& sizes) {
    const size_t rank = sizes.size();
    KILN_CHECK(rank == 3 || rank == 4, "lowering: ", n->target(), " needs a 3-d or 4-d input");
    std::vector<int64_t> r(rank, 0);
    for (size_t d = rank - 2; d < rank; ++d) {
      std::optional<int64_t> c = sizes[d].constant();
      if (!c)
        throw NotImplementedError("lowering: " + n->target() + " (%" + n->name() + ") over symbolic spatial sizes (" +
                                  shapeString(sizes) + ") does not lower (the window is unrolled over them)");
      r[d] = *c;
    }
    return r;
  }

  // The window of a pooling call whose kernel_size is argument `first` (stride, padding and, when
  // `dilated`, dilation follow), over an input and output of these sizes (3-d or 4-d).
  PoolWindow poolWindow(const Node* n, size_t first, const Shape& inSizes, const Shape& outSizes,
                        bool dilated = true) {
    std::vector<int64_t> in = spatialSizes(n, inSizes), out = spatialSizes(n, outSizes);
    const size_t rank = in.size();
    KILN_CHECK(out.size() == rank, "lowering: ", n->target(), " needs a 3-d or 4-d input");
    auto pair = [&](size_t pos, std::string_view name, std::vector<int64_t> dflt) {
      const Argument* a = argOf(n, pos, name);
      std::vector<int64_t> v = (!a || a->isNone()) ? dflt : intList(*a, n->target() + " " + std::string(name));
      if (v.empty()) v = dflt;
      KILN_CHECK(v.size() == 1 || v.size() == 2, "lowering: ", n->target(), " ", name, " needs 1 or 2 ints");
      return std::array<int64_t, 2>{v[0], v.size() == 1 ? v[0] : v[1]};
    };
    PoolWindow w;
    w.kernel = pair(first, "kernel_size", {});
    w.stride = pair(first + 1, "stride", {w.kernel[0], w.kernel[1]});
    w.padding = pair(first + 2, "padding", {0});
    w.dilation = dilated ? pair(first + 3, "dilation", {1}) : std::array<int64_t, 2>{1, 1};
    w.in = {in[rank - 2], in[rank - 1]};
    w.out = {out[rank - 2], out[rank - 1]};
    return w;
  }

  // max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
  // ceil_mode, indices): grad_input[.., y, x] sums grad_output over the outputs whose window
  // holds (y, x) and whose index is y*W + x. Along each dim the outputs that can hold an input
  // position are few: for windows that do not overlap (stride >= dilated kernel: the usual 2x2
  // pool) exactly one, o = (y + pad) / stride, valid when the remainder falls on a kernel tap;
  // otherwise one per kernel offset k, o = (y + pad - k*dil) / stride when it divides. They are
  // summed with o ascending, the order in which eager's scatter adds them. Conditions the
  // ranges prove are left out.
  struct PoolCandidate {
    IndexExpr o;              // the output position along the dim
    std::vector<IndexExpr> zero; // expressions that must be 0
    std::vector<std::pair<IndexExpr, int64_t>> below; // (e, n): 0 <= e < n must hold
  };

  static std::vector<PoolCandidate> poolCandidates(const PoolWindow& w, size_t d, const IndexExpr& i) {
    std::vector<PoolCandidate> r;
    const int64_t s = w.stride[d], k = w.kernel[d], dil = w.dilation[d];
    if (s >= (k - 1) * dil + 1) {
      IndexExpr t = i + IndexExpr(w.padding[d]);
      PoolCandidate c{floorDiv(t, IndexExpr(s)), {}, {}};
      IndexExpr rem = mod(t, IndexExpr(s));
      c.below.push_back({c.o, w.out[d]});
      c.below.push_back({rem, (k - 1) * dil + 1});
      if (dil > 1) c.zero.push_back(mod(rem, IndexExpr(dil)));
      r.push_back(c);
      return r;
    }
    for (int64_t kk = k - 1; kk >= 0; --kk) {
      IndexExpr t = i + IndexExpr(w.padding[d] - kk * dil);
      PoolCandidate c{floorDiv(t, IndexExpr(s)), {}, {}};
      c.below.push_back({c.o, w.out[d]});
      if (s > 1) c.zero.push_back(mod(t, IndexExpr(s)));
      r.push_back(c);
    }
    return r;
  }

  // The b8 value of a candidate's conditions, or -1 when the ranges prove them all.
  static int emitCandidateValid(BodyContext& c, const PoolCandidate& p) {
    int valid = -1;
    auto both = [&](int ok) { valid = valid < 0 ? ok : emitMath(c, LoopOpCode::BitwiseAnd, {valid, ok}); };
    int zero = -1;
    auto zeroConst = [&]() {
      if (zero < 0) zero = emitConstant(c, Argument(int64_t(0)), ScalarType::Int64);
      return zero;
    };
    for (const IndexExpr& e : p.zero) {
      Bounds b = bounds(e, c.facts);
      if (b.lo == 0 && b.hi == 0) continue;
      both(emitMath(c, LoopOpCode::Eq, {emitIndexExpr(c, e), zeroConst()}));
    }
    for (const auto& [e, n] : p.below) {
      Bounds b = bounds(e, c.facts);
      int v = -1;
      if (!(b.lo && *b.lo >= 0)) {
        v = emitIndexExpr(c, e);
        both(emitMath(c, LoopOpCode::Ge, {v, zeroConst()}));
      }
      if (!(b.hi && *b.hi < n)) {
        if (v < 0) v = emitIndexExpr(c, e);
        both(emitMath(c, LoopOpCode::Lt, {v, emitConstant(c, Argument(n), ScalarType::Int64)}));
      }
    }
    return valid;
  }

  // Calls visit(src, valid) for each output position whose window may cover input element idx
  // (over its last two dims), in eager's order: src is that output's index (clamped into range),
  // valid the b8 value of the condition that its window really covers idx (-1: always).
  template <typename Visit>
  static void forEachPoolCandidate(BodyContext& c, const PoolWindow& w, const Index& idx, Visit visit) {
    const size_t rank = idx.size();
    std::vector<PoolCandidate> ys = poolCandidates(w, 0, idx[rank - 2]);
    std::vector<PoolCandidate> xs = poolCandidates(w, 1, idx[rank - 1]);
    for (const PoolCandidate& y : ys) {
      for (const PoolCandidate& x : xs) {
        Index src = idx;
        src[rank - 2] = max(IndexExpr(0), min(y.o, IndexExpr(w.out[0] - 1)));
        src[rank - 1] = max(IndexExpr(0), min(x.o, IndexExpr(w.out[1] - 1)));
        int valid = emitCandidateValid(c, y), vx = emitCandidateValid(c, x);
        if (vx >= 0) valid = valid < 0 ? vx : emitMath(c, LoopOpCode::BitwiseAnd, {valid, vx});
        visit(src, valid);
      }
    }
  }

  Value lowerMaxPool2dBackward(const Node* n) {
    const Value& grad = operand(n, 0, "grad_output");
    const Value& self = operand(n, 1, "self");
    const Value& indices = operand(n, 7, "indices");
    PoolWindow w = poolWindow(n, 2, self.sizes, grad.sizes);
    Loader g = grad.load, at = indices.load;
    ScalarType dtype = grad.dtype;
    int64_t cost = (grad.cost + indices.cost + 10) * w.kernel[0] * w.kernel[1];
    return derived(
        n, [g, at, w, dtype](BodyContext& c, const Index& idx) {
          const size_t rank = idx.size();
          int sum = emitConstant(c, Argument(int64_t(0)), dtype);
          int self = emitIndexExpr(c, idx[rank - 2] * IndexExpr(w.in[1]) + idx[rank - 1]);
          forEachPoolCandidate(c, w, idx, [&](const Index& src, int valid) {
            int take = emitMath(c, LoopOpCode::Eq, {emitCast(c, at(c, src), ScalarType::Int64), self});
            if (valid >= 0) take = emitMath(c, LoopOpCode::BitwiseAnd, {valid, take});
            int zero = emitConstant(c, Argument(int64_t(0)), dtype);
            sum = emitMath(c, LoopOpCode::Add, {sum, emitMath(c, LoopOpCode::Where, {take, g(c, src), zero})});
          });
          return sum;
        },
        cost);
  }

  // avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
  // divisor_override) and _adaptive_avg_pool2d(self, output_size) when the input divides into
  // the output (windows of in/out, no padding): each output sums its window's taps, unrolled in
  // row-major order from 0 as eager does (taps that padding or ceil_mode can push outside read a
  // clamped position and add 0), then divides by the divisor eager uses: the override, the
  // window's extent over the padded input (count_include_pad) or over the input.
  Value lowerAvgPool2d(const Node* n, bool adaptive) {
    const Value& self = operand(n, 0, "self");
    const Shape& outSizes = tensorTypeOf(n).sizes;
    AvgPool pool;
    if (adaptive) {
      pool.w = adaptivePoolWindow(n, self.sizes, outSizes);
    } else {
      pool.w = poolWindow(n, 1, self.sizes, outSizes, /*dilated=*/false);
      pool.includePad = boolArg(n, 5, "count_include_pad", true);
      const Argument* o = argOf(n, 6, "divisor_override");
      if (o && !o->isNone()) pool.divisor = intArg(n, 6, "divisor_override");
    }
    Loader in = self.load;
    ScalarType dtype = self.dtype;
    const PoolWindow& w = pool.w;
    int64_t cost = (self.cost + 3) * w.kernel[0] * w.kernel[1];
    return derived(
        n, [in, pool, dtype](BodyContext& c, const Index& idx) {
          const PoolWindow& w = pool.w;
          const size_t r = idx.size();
          int zero = emitConstant(c, Argument(int64_t(0)), dtype);
          int sum = zero;
          std::array<IndexExpr, 2> start;
          for (size_t d = 0; d < 2; ++d)
            start[d] = idx[r - 2 + d] * IndexExpr(w.stride[d]) - IndexExpr(w.padding[d]);
          for (int64_t ky = 0; ky < w.kernel[0]; ++ky) {
            for (int64_t kx = 0; kx < w.kernel[1]; ++kx) {
              std::array<int64_t, 2> k = {ky, kx};
              Index src = idx;
              int valid = -1;
              for (size_t d = 0; d < 2; ++d) {
                PoolCandidate tap{start[d] + IndexExpr(k[d]), {}, {}};
                tap.below.push_back({tap.o, w.in[d]});
                int ok = emitCandidateValid(c, tap);
                src[r - 2 + d] = ok < 0 ? tap.o : max(IndexExpr(0), min(tap.o, IndexExpr(w.in[d] - 1)));
                if (ok >= 0) valid = valid < 0 ? ok : emitMath(c, LoopOpCode::BitwiseAnd, {valid, ok});
              }
              int v = in(c, src);
              if (valid >= 0) v = emitMath(c, LoopOpCode::Where, {valid, v, zero});
              sum = emitMath(c, LoopOpCode::Add, {sum, v});
            }
          }
          int by = emitCast(c, emitIndexExpr(c, pool.divisorAt({idx[r - 2], idx[r - 1]}, c.facts)), dtype);
          return emitMath(c, LoopOpCode::Div, {sum, by});
        },
        cost);
  }

  // An average pool's window and divisor rule (avg_pool2d's arguments; an adaptive pool is a
  // window of in/out with the padded count).
  struct AvgPool {
    PoolWindow w;
    bool includePad = true;
    std::optional<int64_t> divisor;

    // The divisor of the output at spatial position `o`, as eager's avgDivisor: the override,
    // or the window's extent over the padded input (count_include_pad) or over the input; at
    // least 1 (an empty window, only where ceil_mode leaves one, gives 0 as eager's count 1).
    IndexExpr divisorAt(const std::array<IndexExpr, 2>& o, const RangeFacts& facts) const {
      if (divisor) return IndexExpr(*divisor);
      std::array<IndexExpr, 2> extent;
      for (size_t d = 0; d < 2; ++d) {
        IndexExpr start = o[d] * IndexExpr(w.stride[d]) - IndexExpr(w.padding[d]);
        IndexExpr end = min(start + IndexExpr(w.kernel[d]), IndexExpr(w.in[d] + w.padding[d]));
        extent[d] = includePad ? end - start : min(end, IndexExpr(w.in[d])) - max(start, IndexExpr(0));
      }
      return simplify(max(simplify(extent[0] * extent[1], facts), IndexExpr(1)), facts);
    }
  };

  // _adaptive_avg_pool2d's window where the input divides into the output: windows of in/out,
  // no padding.
  PoolWindow adaptivePoolWindow(const Node* n, const Shape& inSizes, const Shape& outSizes) {
    std::vector<int64_t> ins = spatialSizes(n, inSizes), outs = spatialSizes(n, outSizes);
    const size_t rank = ins.size();
    PoolWindow w;
    for (size_t d = 0; d < 2; ++d) {
      int64_t in = ins[rank - 2 + d], out = outs[rank - 2 + d];
      KILN_CHECK(out > 0 && in % out == 0, "lowering: ", n->target(), " lowers only when the "
                 "input size divides by the output size");
      w.kernel[d] = w.stride[d] = in / out;
      w.padding[d] = 0;
      w.dilation[d] = 1;
      w.in[d] = in;
      w.out[d] = out;
    }
    return w;
  }

  // avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
  // count_include_pad, divisor_override) and _adaptive_avg_pool2d_backward(grad_output, self):
  // grad_input[.., y, x] adds grad_output / divisor over the outputs whose window holds (y, x)
  // (poolCandidates, undilated), in ascending output order from 0 as eager's scatter adds them.
  Value lowerAvgPool2dBackward(const Node* n, bool adaptive) {
    const Value& grad = operand(n, 0, "grad_output");
    const Value& self = operand(n, 1, "self");
    AvgPool pool;
    if (adaptive) {
      pool.w = adaptivePoolWindow(n, self.sizes, grad.sizes);
    } else {
      pool.w = poolWindow(n, 2, self.sizes, grad.sizes, /*dilated=*/false);
      pool.includePad = boolArg(n, 6, "count_include_pad", true);
      const Argument* o = argOf(n, 7, "divisor_override");
      if (o && !o->isNone()) pool.divisor = intArg(n, 7, "divisor_override");
    }
    Loader g = grad.load;
    ScalarType dtype = grad.dtype;
    int64_t cost = (grad.cost + 12) * pool.w.kernel[0] * pool.w.kernel[1];
    return derived(
        n, [g, pool, dtype](BodyContext& c, const Index& idx) {
          const size_t rank = idx.size();
          int zero = emitConstant(c, Argument(int64_t(0)), dtype);
          int sum = zero;
          forEachPoolCandidate(c, pool.w, idx, [&](const Index& src, int valid) {
            IndexExpr count = pool.divisorAt({src[rank - 2], src[rank - 1]}, c.facts);
            int v = emitMath(c, LoopOpCode::Div, {g(c, src), emitCast(c, emitIndexExpr(c, count), dtype)});
            if (valid >= 0) v = emitMath(c, LoopOpCode::Where, {valid, v, zero});
            sum = emitMath(c, LoopOpCode::Add, {sum, v});
          });
          return sum;
        },
        cost);
  }

  // The (value or index) result of one max pooling window at output index `idx`.
  static int emitMaxWindow(BodyContext& c, const Loader& in, const PoolWindow& w, ScalarType dtype,
                           const Index& idx, bool wantIndex) {
    const size_t rank = idx.size();
    int best = -1, where = -1, found = -1; // found: a valid element was seen (-1: statically yes)
    bool floating = isFloatingType(dtype);
    for (int64_t ky = 0; ky < w.kernel[0]; ++ky) {
      for (int64_t kx = 0; kx < w.kernel[1]; ++kx) {
        std::array<int64_t, 2> k = {ky, kx};
        Index src = idx;
        int valid = -1; // -1: always inside
        std::array<IndexExpr, 2> pos;
        for (size_t d = 0; d < 2; ++d) {
          const IndexExpr& o = idx[rank - 2 + d];
          int64_t off = k[d] * w.dilation[d] - w.padding[d];
          pos[d] = o * IndexExpr(w.stride[d]) + IndexExpr(off);
          bool inside = off >= 0 && (w.out[d] - 1) * w.stride[d] + off < w.in[d];
          if (inside) {
            src[rank - 2 + d] = pos[d];
            continue;
          }
          // Read a clamped position and mask the element out.
          src[rank - 2 + d] = max(IndexExpr(0), min(pos[d], IndexExpr(w.in[d] - 1)));
          int p = emitIndexExpr(c, pos[d]);
          int lo = emitMath(c, LoopOpCode::Ge, {p, emitConstant(c, Argument(int64_t(0)), ScalarType::Int64)});
          int hi = emitMath(c, LoopOpCode::Lt, {p, emitConstant(c, Argument(w.in[d]), ScalarType::Int64)});
          int ok = emitMath(c, LoopOpCode::BitwiseAnd, {lo, hi});
          valid = valid < 0 ? ok : emitMath(c, LoopOpCode::BitwiseAnd, {valid, ok});
        }
        int v = in(c, src);
        int flat = wantIndex ? emitIndexExpr(c, pos[0] * IndexExpr(w.in[1]) + pos[1]) : -1;
        if (best < 0) {
          // The first element: the initial best and index. When it may lie outside, `found`
          // says whether it did not, and until a valid element is seen every valid one is
          // taken (so the initial value, a clamped read, never survives).
          best = v;
          where = flat;
          found = valid;
          continue;
        }
        // take = valid && (nothing valid yet || v > best || v != v)
        int take = emitMath(c, LoopOpCode::Gt, {v, best});
        if (floating) take = emitMath(c, LoopOpCode::BitwiseOr, {take, emitMath(c, LoopOpCode::Ne, {v, v})});
        if (found >= 0) {
          int none = emitMath(c, LoopOpCode::Eq, {found, emitConstant(c, Argument(false), ScalarType::Bool)});
          take = emitMath(c, LoopOpCode::BitwiseOr, {take, none});
        }
        if (valid >= 0) take = emitMath(c, LoopOpCode::BitwiseAnd, {take, valid});
        best = emitMath(c, LoopOpCode::Where, {take, v, best});
        if (wantIndex) where = emitMath(c, LoopOpCode::Where, {take, flat, where});
        if (found >= 0 && valid >= 0) found = emitMath(c, LoopOpCode::BitwiseOr, {found, valid});
        else if (valid < 0) found = -1;
      }
    }
    return wantIndex ? where : best;
  }
};

} // namespace

LoopProgram lowerToLoops(const Graph& primsGraph) { return Lowerer(primsGraph).run(); }

} // namespace kiln::compiler
