// cpuKernel: turns a scalar lambda into TensorIterator's 1-D loop. The lambda's parameter and
// return types say what each operand holds; contiguous runs get a tight loop the compiler
// vectorizes. Lambdas must not throw (they run inside OpenMP regions): check inputs first.
#pragma once
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "runtime/TensorIterator.h"

namespace kiln::cpu {

template <typename F> struct FunctionTraits : FunctionTraits<decltype(&F::operator())> {};
template <typename C, typename R, typename... A> struct FunctionTraits<R (C::*)(A...) const> {
  using Result = R;
  using Args = std::tuple<std::decay_t<A>...>;
  static constexpr size_t arity = sizeof...(A);
};

namespace detail {
template <typename F, typename Traits, size_t... I>
inline void stridedRun(const F& f, char** data, const int64_t* strides, int64_t n,
                       std::index_sequence<I...>) {
  using R = typename Traits::Result;
  using Args = typename Traits::Args;
  constexpr bool dense = true;
  (void)dense;
  bool contiguous = strides[0] == int64_t(sizeof(R)) &&
                    ((strides[I + 1] == int64_t(sizeof(std::tuple_element_t<I, Args>))) && ...);
  if (contiguous) {
    R* __restrict out = reinterpret_cast<R*>(data[0]);
    std::tuple<const std::tuple_element_t<I, Args>* __restrict...> in{
        reinterpret_cast<const std::tuple_element_t<I, Args>*>(data[I + 1])...};
    for (int64_t i = 0; i < n; ++i) out[i] = f(std::get<I>(in)[i]...);
    return;
  }
  // One operand broadcast along the run (x + scalar): keep the scalar in a register.
  if (strides[0] == int64_t(sizeof(R)) && ((strides[I + 1] == 0 ||
       strides[I + 1] == int64_t(sizeof(std::tuple_element_t<I, Args>))) && ...)) {
    R* __restrict out = reinterpret_cast<R*>(data[0]);
    for (int64_t i = 0; i < n; ++i)
      out[i] = f(*reinterpret_cast<const std::tuple_element_t<I, Args>*>(data[I + 1] +
                                                                        i * strides[I + 1])...);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<R*>(data[0] + i * strides[0]) =
        f(*reinterpret_cast<const std::tuple_element_t<I, Args>*>(data[I + 1] + i * strides[I + 1])...);
  }
}
} // namespace detail

// Runs f over every element: output 0 = f(input 0, input 1, ...).
template <typename F> void cpuKernel(const TensorIterator& iter, const F& f) {
  using Traits = FunctionTraits<F>;
  iter.forEach([&](char** data, const int64_t* strides, int64_t n) {
    detail::stridedRun<F, Traits>(f, data, strides, n, std::make_index_sequence<Traits::arity>{});
  });
}

} // namespace kiln::cpu
