// Pooling: max/avg/adaptive pools unrolled over their windows, and their backward as a
// gather over the candidate output positions (no scatter).
#include "compiler/lowering/Lowerer.h"

#include <algorithm>
#include <array>

namespace kiln::compiler::lowering {

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (values,
// indices): each output reads its window's kh*kw elements, unrolled in row-major order, with
// eager's rule (runtime/cpu/PoolingKernels.cpp): an element replaces the best so far when it
// is greater or NaN; the index is the first valid position's until one does. Window rows or
// columns that can fall outside the input (padding, ceil_mode) are masked; the others are
// proven inside by the output's range and read unmasked.
std::vector<Value> Lowerer::lowerMaxPool2d(const Node* n) {
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

// The sizes of a pooling operand (3-d or 4-d) whose last two (spatial) dims are static: the
// window is unrolled over them. The dims before (batch, channels) pass through the loaders'
// indices and may be size symbols; they are 0 here.
std::vector<int64_t> Lowerer::spatialSizes(const Node* n, const Shape& sizes) {
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
Lowerer::PoolWindow Lowerer::poolWindow(const Node* n, size_t first, const Shape& inSizes, const Shape& outSizes,
                                        bool dilated) {
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

std::vector<Lowerer::PoolCandidate> Lowerer::poolCandidates(const PoolWindow& w, size_t d, const IndexExpr& i) {
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
int Lowerer::emitCandidateValid(BodyContext& c, const PoolCandidate& p) {
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
void Lowerer::forEachPoolCandidate(BodyContext& c, const PoolWindow& w, const Index& idx, Visit visit) {
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

Value Lowerer::lowerMaxPool2dBackward(const Node* n) {
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
Value Lowerer::lowerAvgPool2d(const Node* n, bool adaptive) {
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

// _adaptive_avg_pool2d's window where the input divides into the output: windows of in/out,
// no padding.
Lowerer::PoolWindow Lowerer::adaptivePoolWindow(const Node* n, const Shape& inSizes, const Shape& outSizes) {
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
Value Lowerer::lowerAvgPool2dBackward(const Node* n, bool adaptive) {
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
int Lowerer::emitMaxWindow(BodyContext& c, const Loader& in, const PoolWindow& w, ScalarType dtype,
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

} // namespace kiln::compiler::lowering
