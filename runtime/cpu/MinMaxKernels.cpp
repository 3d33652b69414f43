// amax, amin, max, min (whole tensor and along a dim, with indices), argmax, argmin. NaN wins
// over every number (and the first NaN's index is returned); ties give the first index.
#include <cstdint>
#include <cmath>
#include <limits>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Reduction.h"
#include "runtime/cpu/ReduceLoops.h"

namespace kiln::kernels {

namespace {

template <typename M> inline bool isNan(M v) {
  if constexpr (std::is_floating_point_v<M>) return std::isnan(v);
  else return false;
}

// Does a beat b? (NaN beats everything; otherwise the larger for max, the smaller for min.)
template <bool kMax, typename M> inline bool beats(M a, M b) {
  if constexpr (std::is_floating_point_v<M>) {
    if (std::isnan(a)) return true;
  }
  return kMax ? a > b : a < b;
}

template <bool kMax, typename M> constexpr M worst() {
  if constexpr (std::is_same_v<M, bool>) return !kMax;
  else if constexpr (std::is_floating_point_v<M>)
    return kMax ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::infinity();
  else return kMax ? std::numeric_limits<M>::lowest() : std::numeric_limits<M>::max();
}

// amax / amin: the extreme value.
template <typename T, bool kMax> struct ExtremumOp {
  using acc_t = opmath_t<T>;
  acc_t identity() const { return worst<kMax, acc_t>(); }
  acc_t step(acc_t a, acc_t v, int64_t) const { return beats<kMax>(v, a) ? v : a; }
  acc_t combine(acc_t a, acc_t b) const { return beats<kMax>(b, a) ? b : a; }
  void write(char* const* out, acc_t a) const { *reinterpret_cast<T*>(out[0]) = T(a); }
};

template <typename M> struct ValueIndex {
  M value;
  int64_t index;
};

// max.dim / argmax: the extreme value and its position (-1: none yet). Steps come in position
// order, so a step only has to beat the value; combining partial results compares positions
// too: the earlier one wins ties and among NaNs.
template <typename T, bool kMax, bool kValues> struct ArgExtremumOp {
  using M = opmath_t<T>;
  using acc_t = ValueIndex<M>;
  acc_t identity() const { return {worst<kMax, M>(), -1}; }
  acc_t step(acc_t a, M x, int64_t i) const {
    bool take = a.index < 0 || (kMax ? x > a.value : x < a.value) || (isNan(x) && !isNan(a.value));
    return take ? acc_t{x, i} : a;
  }
  acc_t combine(acc_t a, acc_t b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    bool earlier = b.index < a.index;
    if (isNan(a.value) || isNan(b.value))
      return isNan(b.value) && (!isNan(a.value) || earlier) ? b : a;
    bool beyond = kMax ? b.value > a.value : b.value < a.value;
    return beyond || (b.value == a.value && earlier) ? b : a;
  }
  // A contiguous run block by block: the block's extreme value in vectorized lanes, then its
  // first position only when it beats the result so far.
  acc_t contiguousRun(const T* p, int64_t n, int64_t pos0) const {
    constexpr int64_t kBlock = 512;
    constexpr int kVec = 16;
    acc_t best = identity();
    for (int64_t b = 0; b < n && !isNan(best.value); b += kBlock) {
      const int64_t len = std::min(kBlock, n - b);
      M lanes[kVec];
      for (int k = 0; k < kVec; ++k) lanes[k] = worst<kMax, M>();
      const int64_t body = len / kVec * kVec;
      for (int64_t i = 0; i < body; i += kVec)
        for (int k = 0; k < kVec; ++k) {
          M x = cpu::toOpmath(p[b + i + k]);
          lanes[k] = beats<kMax>(x, lanes[k]) ? x : lanes[k];
        }
      M blockBest = lanes[0];
      for (int k = 1; k < kVec; ++k)
        blockBest = beats<kMax>(lanes[k], blockBest) ? lanes[k] : blockBest;
      for (int64_t i = body; i < len; ++i) {
        M x = cpu::toOpmath(p[b + i]);
        blockBest = beats<kMax>(x, blockBest) ? x : blockBest;
      }
      if (best.index >= 0 && !beats<kMax>(blockBest, best.value)) continue;
      for (int64_t i = 0; i < len; ++i) {
        M x = cpu::toOpmath(p[b + i]);
        if (isNan(blockBest) ? isNan(x) : x == blockBest) {
          best = {x, pos0 + b + i};
          break;
        }
      }
    }
    return best;
  }
  void write(char* const* out, acc_t a) const {
    if constexpr (kValues) {
      *reinterpret_cast<T*>(out[0]) = T(a.value);
      *reinterpret_cast<int64_t*>(out[1]) = a.index;
    } else {
      *reinterpret_cast<int64_t*>(out[0]) = a.index;
    }
  }
};

template <bool kMax>
Tensor extremum(const char* op, const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  DimMask mask = makeDimMask(dim, self.dim());
  checkReductionHasElements(op, self, mask, dim && !dim->empty(), false);
  Tensor out = emptyReduction(self, mask, keepdim, self.dtype());
  if (out.isMeta() || self.isMeta()) return out;
  ReductionPlan plan = planReduction(self, mask, {out});
  KILN_DISPATCH_ALL(self.dtype(), op, [&]<typename scalar_t>() {
    cpu::reduceKernel<scalar_t>(plan, ExtremumOp<scalar_t, kMax>{});
  });
  return out;
}

template <bool kMax>
std::tuple<Tensor, Tensor> extremumDim(const char* op, const Tensor& self, int64_t dim,
                                       bool keepdim) {
  int64_t d = wrapDim(dim, self.dim());
  DimMask mask = makeDimMask(IntArrayRef{d}, self.dim());
  checkReductionHasElements(op, self, mask, true, false);
  Tensor values = emptyReduction(self, mask, keepdim, self.dtype());
  Tensor indices = emptyReduction(self, mask, keepdim, ScalarType::Int64);
  if (self.isMeta()) return {values, indices};
  ReductionPlan plan = planReduction(self, mask, {values, indices});
  KILN_DISPATCH_ALL(self.dtype(), op, [&]<typename scalar_t>() {
    cpu::reduceKernel<scalar_t>(plan, ArgExtremumOp<scalar_t, kMax, true>{});
  });
  return {values, indices};
}

template <bool kMax>
Tensor argExtremum(const char* op, const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  KILN_CHECK(self.dtype() != ScalarType::Bool, op, "(): does not support bool input");
  DimMask mask;
  Tensor in = self;
  if (dim) {
    int64_t d = wrapDim(*dim, self.dim());
    mask = makeDimMask(IntArrayRef{d}, self.dim());
    checkReductionHasElements(op, self, mask, true, true);
  } else {
    // Positions count in the flattened (row-major) tensor: reduce a contiguous copy.
    mask = makeDimMask(std::nullopt, self.dim());
    checkReductionHasElements(op, self, mask, false, true);
    in = ops::contiguous(self);
  }
  Tensor out = emptyReduction(self, mask, keepdim, ScalarType::Int64);
  if (self.isMeta()) return out;
  ReductionPlan plan = planReduction(in, mask, {out});
  KILN_CHECK(plan.reducedSizes.size() == 1, op, "(): expected a single reduced dim");
  KILN_DISPATCH_NUMERIC(self.dtype(), op, [&]<typename scalar_t>() {
    cpu::reduceKernel<scalar_t>(plan, ArgExtremumOp<scalar_t, kMax, false>{});
  });
  return out;
}

} // namespace

Tensor amax(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return extremum<true>("amax", self, dim, keepdim);
}

Tensor amin(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return extremum<false>("amin", self, dim, keepdim);
}

Tensor max(const Tensor& self) { return extremum<true>("max", self, std::nullopt, false); }

Tensor min(const Tensor& self) { return extremum<false>("min", self, std::nullopt, false); }

std::tuple<Tensor, Tensor> maxDim(const Tensor& self, int64_t dim, bool keepdim) {
  return extremumDim<true>("max", self, dim, keepdim);
}

std::tuple<Tensor, Tensor> minDim(const Tensor& self, int64_t dim, bool keepdim) {
  return extremumDim<false>("min", self, dim, keepdim);
}

Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return argExtremum<true>("argmax", self, dim, keepdim);
}

Tensor argmin(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return argExtremum<false>("argmin", self, dim, keepdim);
}

} // namespace kiln::kernels
