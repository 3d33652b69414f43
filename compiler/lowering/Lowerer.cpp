// The Lowerer's core: values and their loaders, the realization policy (what becomes a
// buffer), views and strided layouts for extern kernels, graph inputs and outputs, and the
// prims (pointwise, broadcast, reshape, cat, mm) dispatched by lowerPrim.
#include "compiler/lowering/Lowerer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "ir/IndexExprReader.h"
#include "runtime/TensorImpl.h"

namespace kiln::compiler::lowering {

LoopProgram Lowerer::run() {
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

std::string Lowerer::freshName() {
  for (;;) {
    std::string n = "buf" + std::to_string(counter_++);
    if (names_.insert(n).second) return n;
  }
}

Value Lowerer::bufferValue(const std::string& name, ScalarType dtype, const std::vector<int64_t>& sizes) {
  return bufferValue(name, dtype, exprs(sizes));
}

Value Lowerer::bufferValue(const std::string& name, ScalarType dtype, Shape sizes) {
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

// How many loads from memory one element of v emits (identical loads counted once).
int64_t Lowerer::loadsOf(const Value& v) {
  BodyContext c;
  iterVars("i", v.sizes, c.facts);
  v.load(c, loopVars("i", v.sizes.size()));
  return std::count_if(c.body.ops.begin(), c.body.ops.end(),
                       [](const LoopOp& op) { return op.code == LoopOpCode::Load; });
}

// The name of an input or buffer holding v's elements; computes a pointwise buffer when v
// is not one yet (and from then on v loads from it).
std::string Lowerer::realize(Value& v) {
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
bool Lowerer::gathersAlongRows(const Value& v) {
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
void Lowerer::realizeTransposed(Value& v) {
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
std::optional<std::pair<std::string, StridedView>> Lowerer::stridedView(const Value& v) {
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
Buffer* Lowerer::reshapedExternResult(const Value& v) {
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
Buffer* Lowerer::transposedMmResult(const Node* t, const Value& v) {
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
StridedView Lowerer::wholeLayout(const std::string& version) {
  const std::string name = program_.storageRoot(version);
  for (const LoopInput& in : program_.inputs)
    if (in.name == name) return StridedView{0, in.sizes, in.strides};
  for (const Buffer& b : program_.buffers)
    if (b.name == name) return StridedView{0, b.sizes, rowMajorStrides(b.sizes)};
  KILN_CHECK(false, "lowering: no input or buffer %", name);
  return {};
}

Value& Lowerer::valueOf(const Node* n) {
  auto it = values_.find(n);
  KILN_CHECK(it != values_.end(), "lowering: %", n->name(), " is not a lowered tensor value");
  return it->second;
}

const Node* Lowerer::operandNode(const Node* n, size_t pos, std::string_view name) {
  const Argument* a = argOf(n, pos, name);
  KILN_CHECK(a && a->isNode(), "lowering: ", n->target(), " expects a tensor for ", name);
  return a->toNode();
}

Value& Lowerer::operand(const Node* n, size_t pos, std::string_view name) {
  return valueOf(operandNode(n, pos, name));
}

void Lowerer::lowerInput(const Node* n) {
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

void Lowerer::lowerOutput(const Node* n) {
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
Value Lowerer::derived(const Node* n, Loader load, int64_t cost) {
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
Value Lowerer::view(const Node* n, IndexMap map, bool alias) {
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
Value Lowerer::wholeView(const Node* n) {
  const Node* inNode = operandNode(n, 0, "a");
  Value v = valueOf(inNode);
  if (!v.aliasOf) {
    v.aliasOf = inNode;
    v.aliasMap = [](const Index& idx) { return idx; };
    v.aliasWhole = true;
  }
  return v;
}

void Lowerer::lowerCall(const Node* n) {
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
Value Lowerer::tupleItem(const Node* n) {
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

Value Lowerer::lowerPrim(const Node* n, const std::string& prim) {
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
    // A start may be a size expression ("-1 + s0": x[:, -1] along a symbolic dim), fitted over
    // the probe sizes by kiln/compiler/dynamic.py.
    const Argument& starts = *argOf(n, 1, "start_indices");
    KILN_CHECK(starts.isSequence(), "lowering: slice start_indices must be a list");
    Index start;
    for (const Argument& x : starts.items()) {
      bool expr = x.kind() == Argument::Kind::String;
      KILN_CHECK(expr || x.kind() == Argument::Kind::Int,
                 "lowering: slice start_indices must be ints or size expressions");
      start.push_back(expr ? symbolicFill(x.toString()) : IndexExpr(x.toInt()));
    }
    const Argument* st = argOf(n, 3, "strides");
    std::vector<int64_t> step =
        st && !st->isNone() ? intList(*st, "slice strides") : std::vector<int64_t>(start.size(), 1);
    return view(n, [start, step](const Index& idx) {
      Index in;
      for (size_t d = 0; d < idx.size(); ++d) in.push_back(start[d] + idx[d] * step[d]);
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
    // A start over the size symbols (torch.roll along a symbolic dim starts at size - shift),
    // fitted over the probe sizes by kiln/compiler/dynamic.py and written as its expression.
    bool symbolicStart = start && start->kind() == Argument::Kind::String;
    KILN_CHECK(start && step && (start->kind() == Argument::Kind::Int || symbolicStart) &&
                   step->kind() == Argument::Kind::Int,
               "lowering: prims.iota needs an int or size-expression start and an int step");
    IndexExpr s0 = symbolicStart ? symbolicFill(start->toString()) : IndexExpr(start->toInt());
    int64_t s1 = step->toInt();
    ScalarType dtype = tensorTypeOf(n).dtype;
    return derived(
        n, [s0, s1, dtype](BodyContext& c, const Index& idx) {
          return emitCast(c, emitIndexExpr(c, s0 + idx.at(0) * s1), dtype);
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
Value Lowerer::lowerMatmulLoops(const Node* n, bool batched) {
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
Value Lowerer::lowerCat(const Node* n) {
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

Value Lowerer::lowerElementwise(const Node* n, LoopOpCode code) {
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
Value Lowerer::lowerLog10(const Node* n) {
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

Value Lowerer::lowerBroadcast(const Node* n) {
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
Value Lowerer::lowerReshape(const Node* n) {
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
std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> Lowerer::reshapeGroups(
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

} // namespace kiln::compiler::lowering

namespace kiln::compiler {

LoopProgram lowerToLoops(const Graph& primsGraph) { return lowering::Lowerer(primsGraph).run(); }

} // namespace kiln::compiler
