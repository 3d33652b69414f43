// Sums over a contiguous run, vectorized: a single accumulator's ordered adds cannot be
// (floating-point addition is not associative), so float32/float64 runs accumulate in 64-byte
// vectors (GCC vector extensions, two of them to hide the add latency) and 16-bit floats in
// independent scalar lanes. f maps a value (or a vector of them) to the summand: pass a generic
// lambda.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kiln::cpu {

template <typename A> struct Vec64Of;
template <> struct Vec64Of<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <> struct Vec64Of<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <typename A> using Vec64 = typename Vec64Of<A>::type;

template <typename A> A horizontalSum(Vec64<A> v) {
  A total = 0;
  for (size_t k = 0; k < 64 / sizeof(A); ++k) total += v[k];
  return total;
}

template <typename A, typename T> Vec64<A> loadVec(const T* p) {
  Vec64<A> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// sum of f(x[i]) for i < n, in the accumulation type A.
template <typename A, typename T, typename F> A laneSum(const T* x, int64_t n, const F& f) {
  int64_t i = 0;
  A total = 0;
  if constexpr (std::is_same_v<T, A>) {
    constexpr int64_t L = 64 / sizeof(A);
    Vec64<A> acc0 = {}, acc1 = {};
    for (; i + 2 * L <= n; i += 2 * L) {
      acc0 += f(loadVec<A>(x + i));
      acc1 += f(loadVec<A>(x + i + L));
    }
    total = horizontalSum<A>(acc0 + acc1);
  } else {
    constexpr int kLanes = 16;
    A acc[kLanes] = {};
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) acc[k] += f(A(x[i + k]));
    for (int k = 0; k < kLanes; ++k) total += acc[k];
  }
  for (; i < n; ++i) total += f(A(x[i]));
  return total;
}

// The sums of g[i] and of f(x[i]) * g[i] for i < n in one pass.
template <typename A, typename T, typename F>
void laneSumDot(const T* x, const T* g, int64_t n, const F& f, A& sumG, A& dot) {
  int64_t i = 0;
  sumG = 0;
  dot = 0;
  if constexpr (std::is_same_v<T, A>) {
    constexpr int64_t L = 64 / sizeof(A);
    Vec64<A> g0 = {}, g1 = {}, d0 = {}, d1 = {};
    for (; i + 2 * L <= n; i += 2 * L) {
      const Vec64<A> ga = loadVec<A>(g + i), gb = loadVec<A>(g + i + L);
      g0 += ga;
      g1 += gb;
      d0 += f(loadVec<A>(x + i)) * ga;
      d1 += f(loadVec<A>(x + i + L)) * gb;
    }
    sumG = horizontalSum<A>(g0 + g1);
    dot = horizontalSum<A>(d0 + d1);
  } else {
    constexpr int kLanes = 16;
    A accG[kLanes] = {}, accD[kLanes] = {};
    for (; i + kLanes <= n; i += kLanes) {
      for (int k = 0; k < kLanes; ++k) {
        const A gv = A(g[i + k]);
        accG[k] += gv;
        accD[k] += f(A(x[i + k])) * gv;
      }
    }
    for (int k = 0; k < kLanes; ++k) {
      sumG += accG[k];
      dot += accD[k];
    }
  }
  for (; i < n; ++i) {
    sumG += A(g[i]);
    dot += f(A(x[i])) * A(g[i]);
  }
}

} // namespace kiln::cpu
