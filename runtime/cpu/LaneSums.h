// Sums over a contiguous run kept in independent lanes: a single accumulator's ordered adds
// cannot be vectorized (floating-point addition is not associative), kLanes partial sums can.
#pragma once
#include <cstdint>

namespace kiln::cpu {

constexpr int kSumLanes = 16;

// sum of f(x[i]) for i < n, f mapping to the accumulation type A.
template <typename A, typename T, typename F> A laneSum(const T* x, int64_t n, const F& f) {
  A acc[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int k = 0; k < kSumLanes; ++k) acc[k] += f(A(x[i + k]));
  A total = 0;
  for (; i < n; ++i) total += f(A(x[i]));
  for (int k = 0; k < kSumLanes; ++k) total += acc[k];
  return total;
}

// The sums of g[i] and of f(x[i]) * g[i] for i < n in one pass.
template <typename A, typename T, typename F>
void laneSumDot(const T* x, const T* g, int64_t n, const F& f, A& sumG, A& dot) {
  A accG[kSumLanes] = {}, accD[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int k = 0; k < kSumLanes; ++k) {
      const A gv = A(g[i + k]);
      accG[k] += gv;
      accD[k] += f(A(x[i + k])) * gv;
    }
  }
  sumG = 0;
  dot = 0;
  for (; i < n; ++i) {
    sumG += A(g[i]);
    dot += f(A(x[i])) * A(g[i]);
  }
  for (int k = 0; k < kSumLanes; ++k) {
    sumG += accG[k];
    dot += accD[k];
  }
}

} // namespace kiln::cpu
