#include "compiler/lowering/Lowerer.h"

#include <algorithm>

namespace kiln::compiler::lowering {

// Indexing ops (Core ATen, lowered directly: they have no prims decomposition). A read
// through an index tensor is an `indirect` op binding an index variable that the load's
// index uses; a write through one is an in-place pointwise buffer whose index uses it (serial,
// see LoopIR.h Pointwise). The loaders compose like the prims': a gather of a log_softmax
// reads the log_softmax's expression at the gathered element (cross_entropy in one kernel).

// Binds an index variable to the integer value `value` checked against `size`; an equal
// check made before in this body is reused. Returns the variable.
// (`size` may be an expression over size symbols: the variable is then bounded below only.)
IndexExpr Lowerer::emitIndirect(BodyContext& c, int value, const IndexExpr& size, bool wrap,
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

std::string Lowerer::boundsError(const char* type, int64_t dim) {
  return std::string(type) + ": index {index} is out of bounds for dimension " + std::to_string(dim) +
         " with size {size}";
}

int64_t Lowerer::normalizedDim(int64_t dim, size_t rank, const std::string& what) {
  int64_t r = std::max<int64_t>(int64_t(rank), 1);
  KILN_CHECK(dim >= -r && dim < r, "lowering: ", what, ": dim ", dim, " out of range for rank ", rank);
  return dim < 0 ? dim + r : dim;
}

int64_t Lowerer::intArg(const Node* n, size_t pos, std::string_view name, std::optional<int64_t> dflt) {
  const Argument* a = argOf(n, pos, name);
  if ((!a || a->isNone()) && dflt) return *dflt;
  KILN_CHECK(a && a->kind() == Argument::Kind::Int, "lowering: ", n->target(), " needs a static int ", name);
  return a->toInt();
}

bool Lowerer::boolArg(const Node* n, size_t pos, std::string_view name, bool dflt) {
  const Argument* a = argOf(n, pos, name);
  if (!a || a->isNone()) return dflt;
  KILN_CHECK(a->kind() == Argument::Kind::Bool, "lowering: ", n->target(), " needs a bool ", name);
  return a->toBool();
}

// cumsum / cumprod(self, dim, *, dtype): an extern scan (codegen: a running value carried
// along `dim`, parallel over the other dims) of the operand converted to the computation
// dtype (float for 16-bit floats, as eager accumulates them), its result converted back
// lazily. The operand's producers fuse into the one pointwise buffer the scan reads.
Value Lowerer::lowerScan(const Node* n, bool prod) {
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
std::string Lowerer::contiguousOperand(Value& v, ScalarType dtype) {
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

Value Lowerer::lowerIndexing(const Node* n, const std::string& op) {
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
Value Lowerer::lowerGather(const Node* n) {
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
Value Lowerer::lowerIndexSelect(const Node* n) {
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
Value Lowerer::lowerEmbedding(const Node* n) {
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

Lowerer::AdvancedIndexing Lowerer::advancedIndexing(const Node* n, const Value& self, size_t pos) {
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
Index Lowerer::advancedSource(BodyContext& c, const AdvancedIndexing& a, const std::vector<Loader>& loaders,
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
Value Lowerer::lowerAdvancedIndex(const Node* n) {
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
std::string Lowerer::freshCopy(const Value& v) {
  Value copy = v;
  copy.storage.clear();
  copy.aliasOf = nullptr;
  return realize(copy);
}

// An in-place write of `value(c, idx, dst)` over `ranges` into the storage `base` (a fresh
// buffer), at the flat index `dst(c, idx)` built from indirect variables; the result is the
// new version of the storage, with `sizes`.
Value Lowerer::scatterInto(const std::string& base, ScalarType dtype, const Shape& sizes, const Shape& ranges,
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
Value Lowerer::lowerIndexPut(const Node* n) {
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
Value Lowerer::lowerScatter(const Node* n, const std::string& op) {
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
Value Lowerer::lowerEmbeddingBackward(const Node* n) {
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

} // namespace kiln::compiler::lowering
