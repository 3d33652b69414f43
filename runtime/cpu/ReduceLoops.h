// reduceKernel: runs a reduction Op over a ReductionPlan. Each output is accumulated in several
// independent lanes (neighbouring elements of a run, or neighbouring outputs) that the compiler
// vectorizes, with cascade summation (a few levels of partial results, as PyTorch's sum does)
// so float error grows with the log of the length, not the length. Parallel over outputs, or
// over the reduced range when there are few outputs.
//
// An Op provides:
//   using acc_t;                                  the accumulator
//   acc_t identity() const;
//   acc_t step(acc_t a, opmath_t<scalar_t> x, int64_t i) const;
//                                                 i: x's position along the reduced dim
//   acc_t combine(acc_t a, acc_t b) const;        a and b from disjoint parts of the range
//   void write(char* const* out, acc_t a) const;  out[k]: this element of output k
// and optionally, for ops whose accumulator does not vectorize:
//   acc_t contiguousRun(const scalar_t* p, int64_t n, int64_t pos0) const;
// Positions are only meaningful for a single reduced dim (argmax and max.dim reduce one). Each
// accumulator is stepped in increasing position order; partial results are then combined.
#pragma once
#include <cstdint>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <memory>

#include "runtime/Reduction.h"
#include "runtime/cpu/VectorizableMath.h"

namespace kiln::cpu {

namespace detail {

// Offsets of consecutive elements of an index space (innermost dim first), for up to three
// stride sets at once (the input and two outputs).
class Cursor {
public:
  static constexpr int kMaxSets = 3;
  Cursor(IntArrayRef sizes, const IntArrayRef* strides, int numSets)
      : sizes_(sizes), index_(sizes.size()), numSets_(numSets) {
    for (int k = 0; k < numSets; ++k) strides_[k] = strides[k];
  }
  void seek(int64_t linear) {
    for (int k = 0; k < numSets_; ++k) offset_[k] = 0;
    for (size_t d = 0; d < sizes_.size(); ++d) {
      index_[d] = linear % sizes_[d];
      linear /= sizes_[d];
      for (int k = 0; k < numSets_; ++k) offset_[k] += index_[d] * strides_[k][d];
    }
  }
  void next() {
    for (size_t d = 0; d < sizes_.size(); ++d) {
      for (int k = 0; k < numSets_; ++k) offset_[k] += strides_[k][d];
      if (++index_[d] < sizes_[d]) return;
      for (int k = 0; k < numSets_; ++k) offset_[k] -= sizes_[d] * strides_[k][d];
      index_[d] = 0;
    }
  }
  int64_t offset(int k = 0) const { return offset_[k]; }

private:
  IntArrayRef sizes_;
  DimVector index_;
  IntArrayRef strides_[kMaxSets];
  int64_t offset_[kMaxSets] = {0, 0, 0};
  int numSets_;
};

// Rows one stride apart (the rows of a run split into lanes).
struct UniformRows {
  int64_t off, stride;
  int64_t offset() const { return off; }
  void next() { off += stride; }
};

// Lanes per accumulation: several vector registers' worth of independent accumulators.
template <typename acc_t> constexpr int lanesFor() {
  return sizeof(acc_t) <= 4 ? 32 : sizeof(acc_t) <= 8 ? 16 : 8;
}

constexpr int kLevels = 4;

// Reduces `rows` rows of nLanes lanes: lane k of a row is at row + k * laneStride, its position
// is pos0 + k * lanePos + r * rowPos. Level 0 takes at most 2^power rows before it is folded
// into level 1, and so on (PyTorch's multi_row_sum). Results are combined into out[k].
template <int W, bool kContiguous, bool kFull, typename scalar_t, typename Op, typename Rows>
void reduceLanes(const Op& op, const char* base, int64_t laneStride, int nLanes, Rows rows,
                 int64_t numRows, int64_t pos0, int64_t lanePos, int64_t rowPos,
                 typename Op::acc_t* out) {
  using acc_t = typename Op::acc_t;
  const int n = kFull ? W : nLanes;
  const int64_t power = std::max<int64_t>(4, (64 - std::countl_zero(uint64_t(numRows))) / kLevels);
  const int64_t levelStep = int64_t(1) << power, levelMask = levelStep - 1;
  // Up to kLevels * levelStep rows, one level adds no more terms in a row than the cascade would.
  const int levels = numRows <= kLevels * levelStep ? 1 : kLevels;
  acc_t acc[kLevels][W];
  for (int j = 0; j < levels; ++j)
    for (int k = 0; k < W; ++k) acc[j][k] = op.identity();
  int64_t r = 0;
  while (r < numRows) {
    int64_t end = std::min(numRows, r + levelStep);
    for (; r < end; ++r) {
      const char* row = base + rows.offset();
      int64_t pos = pos0 + r * rowPos;
      for (int k = 0; k < n; ++k) {
        const scalar_t* x = kContiguous ? reinterpret_cast<const scalar_t*>(row) + k
                                        : reinterpret_cast<const scalar_t*>(row + k * laneStride);
        acc[0][k] = op.step(acc[0][k], toOpmath(*x), pos + k * lanePos);
      }
      rows.next();
    }
    for (int j = 1; j < levels; ++j) {
      for (int k = 0; k < n; ++k) {
        acc[j][k] = op.combine(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = op.identity();
      }
      if ((r & (levelMask << (j * power))) != 0) break;
    }
  }
  for (int k = 0; k < n; ++k) {
    acc_t total = acc[levels - 1][k];
    for (int j = levels - 2; j >= 0; --j) total = op.combine(total, acc[j][k]);
    out[k] = op.combine(out[k], total);
  }
}

// Reduces n elements stride bytes apart; pos0 is the first one's position.
template <typename scalar_t, typename Op>
typename Op::acc_t reduceRun(const Op& op, const char* p, int64_t stride, int64_t n, int64_t pos0) {
  using acc_t = typename Op::acc_t;
  if constexpr (requires(const scalar_t* x) { op.contiguousRun(x, n, pos0); }) {
    if (stride == int64_t(sizeof(scalar_t)))
      return op.contiguousRun(reinterpret_cast<const scalar_t*>(p), n, pos0);
  }
  constexpr int W = lanesFor<acc_t>();
  int64_t rows = n / W;
  acc_t acc = op.identity();
  if (rows > 0) {
    acc_t lanes[W];
    for (int k = 0; k < W; ++k) lanes[k] = op.identity();
    UniformRows rowWalk{0, W * stride};
    if (stride == int64_t(sizeof(scalar_t)))
      reduceLanes<W, true, true, scalar_t>(op, p, stride, W, rowWalk, rows, pos0, 1, W, lanes);
    else
      reduceLanes<W, false, true, scalar_t>(op, p, stride, W, rowWalk, rows, pos0, 1, W, lanes);
    for (int half = W / 2; half >= 1; half /= 2)
      for (int k = 0; k < half; ++k) lanes[k] = op.combine(lanes[k], lanes[k + half]);
    acc = lanes[0];
  }
  for (int64_t i = rows * W; i < n; ++i)
    acc = op.step(acc, toOpmath(*reinterpret_cast<const scalar_t*>(p + i * stride)), pos0 + i);
  return acc;
}

// Pairwise combination of many partial results in order: level j holds 2^j of them.
template <typename Op> class PartialCascade {
public:
  using acc_t = typename Op::acc_t;
  explicit PartialCascade(const Op& op) : op_(op) {}
  void add(acc_t p) {
    int j = 0;
    for (; count_ >> j & 1; ++j) p = op_.combine(level_[j], p);
    level_[j] = p;
    ++count_;
  }
  acc_t result() const {
    acc_t r = op_.identity();
    for (int j = 63; j >= 0; --j)
      if (count_ >> j & 1) r = op_.combine(r, level_[j]);
    return r;
  }

private:
  const Op& op_;
  acc_t level_[64];
  uint64_t count_ = 0;
};

template <typename scalar_t, typename Op> class Reducer {
public:
  using acc_t = typename Op::acc_t;
  static constexpr int W = lanesFor<acc_t>();

  Reducer(const ReductionPlan& plan, const Op& op) : p_(plan), op_(op) {
    laneCount_ = p_.innerReduction ? 1 : p_.keptSizes[0];
    blocks_ = p_.innerReduction ? 1 : (laneCount_ + W - 1) / W;
    units_ = p_.numOutputs / laneCount_ * blocks_;
  }

  // Work units: one output of an inner reduction, or up to W neighbouring outputs.
  int64_t units() const { return units_; }

  // Reduces units [ub, ue) over the flattened reduced range [rb, re) and hands each output to
  // sink(linear output index, pointers to its elements, accumulator).
  template <typename Sink>
  void reduceUnits(int64_t ub, int64_t ue, int64_t rb, int64_t re, const Sink& sink) const {
    if (ub >= ue) return;
    char* ptrs[ReductionPlan::kMaxOutputs] = {nullptr, nullptr};
    if (p_.innerReduction) {
      Cursor out = keptCursor(0);
      out.seek(ub);
      for (int64_t u = ub; u < ue; ++u, out.next()) {
        for (int k = 0; k < p_.numOutputTensors; ++k) ptrs[k] = p_.outputs[k] + out.offset(k + 1);
        sink(u, ptrs, inner(p_.input + out.offset(), rb, re));
      }
      return;
    }
    const int64_t laneStride = p_.keptInputStrides[0];
    const bool contiguous = laneStride == int64_t(sizeof(scalar_t));
    Cursor outer = keptCursor(1);
    outer.seek(ub / blocks_);
    for (int64_t u = ub; u < ue; ++u) {
      int64_t block = u % blocks_;
      if (u != ub && block == 0) outer.next();
      int64_t l0 = block * W;
      int nl = int(std::min<int64_t>(W, laneCount_ - l0));
      const char* base = p_.input + outer.offset() + l0 * laneStride;
      acc_t lanes[W];
      for (int k = 0; k < W; ++k) lanes[k] = op_.identity();
      auto run = [&](auto rows) {
        const int64_t n = re - rb;
        if (nl == W && contiguous)
          reduceLanes<W, true, true, scalar_t>(op_, base, laneStride, nl, rows, n, rb, 0, 1, lanes);
        else if (nl == W)
          reduceLanes<W, false, true, scalar_t>(op_, base, laneStride, nl, rows, n, rb, 0, 1, lanes);
        else
          reduceLanes<W, false, false, scalar_t>(op_, base, laneStride, nl, rows, n, rb, 0, 1, lanes);
      };
      if (p_.reducedSizes.size() == 1) {
        run(UniformRows{rb * p_.reducedStrides[0], p_.reducedStrides[0]});
      } else {
        IntArrayRef rowStrides = p_.reducedStrides;
        Cursor rows(p_.reducedSizes, &rowStrides, 1);
        rows.seek(rb);
        run(rows);
      }
      for (int k = 0; k < nl; ++k) {
        for (int t = 0; t < p_.numOutputTensors; ++t)
          ptrs[t] = p_.outputs[t] + outer.offset(t + 1) + (l0 + k) * p_.keptOutputStrides[t][0];
        sink(u / blocks_ * laneCount_ + l0 + k, ptrs, lanes[k]);
      }
    }
  }

  // Writes every output from acc (indexed by linear output index).
  void writeAll(const acc_t* acc) const {
    Cursor out = keptCursor(0);
    out.seek(0);
    char* ptrs[ReductionPlan::kMaxOutputs] = {nullptr, nullptr};
    for (int64_t o = 0; o < p_.numOutputs; ++o, out.next()) {
      for (int k = 0; k < p_.numOutputTensors; ++k) ptrs[k] = p_.outputs[k] + out.offset(k + 1);
      op_.write(ptrs, acc ? acc[o] : op_.identity());
    }
  }

private:
  // The kept dims from `first` on: input offsets, then each output's.
  Cursor keptCursor(size_t first) const {
    auto tail = [&](IntArrayRef a) {
      return a.size() < first ? IntArrayRef() : IntArrayRef(a.data() + first, a.size() - first);
    };
    IntArrayRef strides[] = {tail(p_.keptInputStrides), tail(p_.keptOutputStrides[0]),
                             tail(p_.keptOutputStrides[1])};
    return Cursor(tail(p_.keptSizes), strides, 1 + p_.numOutputTensors);
  }

  // One output of an inner reduction over the flattened reduced range [rb, re): runs along the
  // innermost reduced dim, the outer reduced dims walked by a cursor.
  acc_t inner(const char* base, int64_t rb, int64_t re) const {
    const int64_t n = p_.reducedSizes[0], stride = p_.reducedStrides[0];
    if (p_.reducedSizes.size() == 1)
      return reduceRun<scalar_t>(op_, base + rb * stride, stride, re - rb, rb);
    IntArrayRef outerSizes(p_.reducedSizes.data() + 1, p_.reducedSizes.size() - 1);
    IntArrayRef outerStrides(p_.reducedStrides.data() + 1, p_.reducedStrides.size() - 1);
    Cursor runs(outerSizes, &outerStrides, 1);
    runs.seek(rb / n);
    PartialCascade<Op> parts(op_);
    for (int64_t pos = rb; pos < re; runs.next()) {
      int64_t at = pos % n, len = std::min(n - at, re - pos);
      parts.add(reduceRun<scalar_t>(op_, base + runs.offset() + at * stride, stride, len, at));
      pos += len;
    }
    return parts.result();
  }

  const ReductionPlan& p_;
  const Op& op_;
  int64_t laneCount_, blocks_, units_;
};

} // namespace detail

// Runs op over the plan, writing every output element.
template <typename scalar_t, typename Op>
void reduceKernel(const ReductionPlan& plan, const Op& op) {
  using acc_t = typename Op::acc_t;
  const int64_t numOutputs = plan.numOutputs, reduceSize = plan.reduceSize;
  if (numOutputs == 0) return;
  detail::Reducer<scalar_t, Op> reducer(plan, op);
  if (reduceSize == 0) {
    reducer.writeAll(nullptr);
    return;
  }
  const int64_t units = reducer.units();
  constexpr int64_t kGrain = 32768;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (numOutputs * reduceSize < kGrain) threads = 1;

  if (threads == 1 || units >= 4 * threads || reduceSize < 2 * kGrain) {
    // Over outputs: each thread reduces whole outputs and writes them.
    int64_t chunks = std::min<int64_t>(threads, units);
    auto write = [&](int64_t, char* const* ptrs, acc_t a) { op.write(ptrs, a); };
#pragma omp parallel for num_threads(int(chunks)) schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c)
      reducer.reduceUnits(units * c / chunks, units * (c + 1) / chunks, 0, reduceSize, write);
    return;
  }
  // Few outputs, long reductions: each thread takes a slice of the reduced range for every
  // output; the slices' results are combined in order.
  int64_t chunks = std::min<int64_t>(threads, reduceSize / kGrain);
  // Not std::vector: acc_t may be bool.
  std::unique_ptr<acc_t[]> partial(new acc_t[size_t(chunks * numOutputs)]);
#pragma omp parallel for num_threads(int(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    acc_t* slice = partial.get() + c * numOutputs;
    auto keep = [slice](int64_t o, char* const*, acc_t a) { slice[o] = a; };
    reducer.reduceUnits(0, units, reduceSize * c / chunks, reduceSize * (c + 1) / chunks, keep);
  }
  for (int64_t c = 1; c < chunks; ++c)
    for (int64_t o = 0; o < numOutputs; ++o)
      partial[size_t(o)] = op.combine(partial[size_t(o)], partial[size_t(c * numOutputs + o)]);
  reducer.writeAll(partial.get());
}

} // namespace kiln::cpu
