// Reductions: sum/prod/amax/amin/argmax buffers over the reduced dims (adjacent dims merged
// into one loop where the loads allow), var in two passes, integer mm/bmm as a sum.
#include "compiler/lowering/Lowerer.h"

#include <algorithm>
#include <cmath>

namespace kiln::compiler::lowering {

// The reduced dims of a reduction node (its `dims` argument, or every dim for None).
std::vector<bool> Lowerer::reducedDims(const Node* n, const Value& in) {
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

std::string Lowerer::reductionBuffer(const Node* n, ReductionKind kind, ScalarType valueDtype,
                                     ScalarType bufferDtype, const ReducedValue& transform) {
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
int64_t Lowerer::divisionsIn(const LoopBody& body) {
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

Value Lowerer::lowerReduction(const Node* n, ReductionKind kind) {
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
Value Lowerer::lowerVar(const Node* n) {
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

} // namespace kiln::compiler::lowering
