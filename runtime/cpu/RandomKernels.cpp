// Random sampling: rand, randn, randint, randperm, the *_like variants, uniform_, normal_,
// random_ and bernoulli. Every value comes from the default generator's Philox stream (element i
// of a draw from counter first + i), so fills run in parallel yet repeat exactly after
// manual_seed. Bit patterns cannot match PyTorch's mt19937; the distributions and checks do.
#include <cstdint>
#include <cmath>
#include <limits>
#include <numbers>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/CheckedConvert.h"
#include "runtime/CppTypeName.h"
#include "runtime/Generator.h"

namespace kiln::kernels {

namespace {

using Words = std::array<uint32_t, 4>;

// The mantissa bits of T (1 + stored bits): uniform floats are multiples of 2^-digits.
template <typename T> constexpr int mantissaDigits() {
  if constexpr (std::is_same_v<T, Half>)
    return 11;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return 8;
  else
    return std::numeric_limits<T>::digits;
}

uint64_t word64(const Words& w, int first) {
  return (uint64_t(w[size_t(first)]) << 32) | w[size_t(first) + 1];
}

// Uniform in [0, 1), exactly representable in T (so it never rounds up to 1).
template <typename T> double unitUniform(const Words& w) {
  constexpr int digits = mantissaDigits<T>();
  constexpr double scale = 1.0 / double(uint64_t(1) << digits);
  return double(word64(w, 0) >> (64 - digits)) * scale;
}

// Runs fill(data, n) over t's elements in row-major order: in place when t is contiguous,
// through a dense temporary copied back otherwise.
template <typename T, typename F> void fillDense(const Tensor& t, const F& fill) {
  if (t.isMeta() || t.numel() == 0) return;
  Tensor target = t.isContiguous() ? t : Tensor::empty(t.sizes(), t.dtype(), t.device());
  fill(target.data<T>(), t.numel());
  if (!target.isSame(t)) ops::copy_(t, target, false);
}

// Writes value(words of element i) into every element of t.
template <typename T, typename F> void fillRandom(const Tensor& t, const F& value) {
  fillDense<T>(t, [&value](T* data, int64_t n) {
    Generator::Draw draw = defaultGenerator().reserve(uint64_t(n));
#pragma omp parallel for if (n > 32768)
    for (int64_t i = 0; i < n; ++i)
      data[i] = value(randomWords(draw, uint64_t(i)));
  });
}

// Normal values by Box-Muller: one Philox block gives two uniforms, which give the two normals
// r cos(theta) and r sin(theta) of elements 2p and 2p + 1. Double math for float64, float
// otherwise (as PyTorch's CPU kernel does).
template <typename T> void fillNormal(const Tensor& t, double mean, double std) {
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  fillDense<T>(t, [mean, std](T* data, int64_t n) {
    int64_t pairs = (n + 1) / 2;
    Generator::Draw draw = defaultGenerator().reserve(uint64_t(pairs));
    M mu = M(mean), sigma = M(std);
#pragma omp parallel for if (n > 32768)
    for (int64_t p = 0; p < pairs; ++p) {
      Words w = randomWords(draw, uint64_t(p));
      M u1, u2;
      if constexpr (std::is_same_v<M, double>) {
        u1 = 1.0 - double(word64(w, 0) >> 11) * 0x1p-53; // (0, 1]: the logarithm stays finite
        u2 = double(word64(w, 2) >> 11) * 0x1p-53;
      } else {
        u1 = 1.0f - float(w[0] >> 8) * 0x1p-24f;
        u2 = float(w[2] >> 8) * 0x1p-24f;
      }
      M r = std::sqrt(M(-2) * std::log(u1)), theta = M(2 * std::numbers::pi) * u2;
      data[2 * p] = T(mu + sigma * r * std::cos(theta));
      if (2 * p + 1 < n) data[2 * p + 1] = T(mu + sigma * r * std::sin(theta));
    }
  });
}

void checkFloating(const char* kernel, ScalarType dtype) {
  if (!isFloatingType(dtype)) throwUnsupportedDtype(kernel, dtype);
}

void uniformFill(const Tensor& t, double from, double to) {
  checkFloating("check_uniform_bounds", t.dtype());
  KILN_DISPATCH_FLOATING(t.dtype(), "uniform_", [&]<typename scalar_t>() {
    // Values beyond the dtype's range cannot be drawn (PyTorch's check_uniform_bounds).
    double limit = detail::maxFinite<scalar_t>();
    KILN_CHECK(from >= -limit && from <= limit, "from is out of bounds for ",
               cppTypeName(t.dtype()));
    KILN_CHECK(to >= -limit && to <= limit, "to is out of bounds for ", cppTypeName(t.dtype()));
    KILN_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
               " > to=", to);
    double span = to - from;
    fillRandom<scalar_t>(t, [from, span](const Words& w) {
      return scalar_t(unitUniform<scalar_t>(w) * span + from);
    });
  });
}

void normalFill(const Tensor& t, double mean, double std) {
  KILN_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  checkFloating("normal_kernel_cpu", t.dtype());
  KILN_DISPATCH_FLOATING(t.dtype(), "normal_",
                         [&]<typename scalar_t>() { fillNormal<scalar_t>(t, mean, std); });
}

// The values random_ may produce for a dtype: integers [lowest, max], floats the integers
// their mantissa holds exactly ([-2^digits, 2^digits]).
template <typename T> std::pair<int64_t, int64_t> randomBounds() {
  if constexpr (std::is_same_v<T, bool>)
    return {0, 1};
  else if constexpr (std::is_integral_v<T>)
    return {int64_t(std::numeric_limits<T>::lowest()), int64_t(std::numeric_limits<T>::max())};
  else
    return {-(int64_t(1) << mantissaDigits<T>()), int64_t(1) << mantissaDigits<T>()};
}

// Fills t with integers uniform in [from, last] (both included), PyTorch's bound checks first.
void randomFill(const Tensor& t, int64_t from, int64_t last, bool checkLast) {
  KILN_DISPATCH_ALL(t.dtype(), "random_", [&]<typename scalar_t>() {
    auto [lo, hi] = randomBounds<scalar_t>();
    // float64's range check is only a warning in PyTorch: doubles take any int64 range.
    if constexpr (!std::is_same_v<scalar_t, double>) {
      KILN_CHECK(from >= lo && from <= hi, "from is out of bounds for ", cppTypeName(t.dtype()));
      KILN_CHECK(!checkLast || (last >= lo && last <= hi), "to - 1 is out of bounds for ",
                 cppTypeName(t.dtype()));
    }
    uint64_t range = uint64_t(last) - uint64_t(from) + 1; // 0 means all 2^64 values
    fillRandom<scalar_t>(t, [from, range](const Words& w) {
      uint64_t r = word64(w, 0);
      int64_t v = int64_t(uint64_t(from) + (range == 0 ? r : r % range));
      if constexpr (std::is_same_v<scalar_t, bool>)
        return v != 0;
      else if constexpr (std::is_integral_v<scalar_t> || std::is_same_v<scalar_t, double>)
        return scalar_t(v);
      else
        return scalar_t(float(v));
    });
  });
}

void randomFromTo(const Tensor& t, int64_t from, int64_t to) {
  KILN_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from,
             " >= to=", to);
  randomFill(t, from, to - 1, true);
}

// dense (contiguous) gets 1 where a uniform draw falls below probs[i], 0 elsewhere.
template <typename T> void bernoulliFill(const Tensor& dense, const double* probs) {
  int64_t n = dense.numel();
  Generator::Draw draw = defaultGenerator().reserve(uint64_t(n));
  T* data = dense.data<T>();
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    double u = double(word64(randomWords(draw, uint64_t(i)), 0) >> 11) * 0x1p-53;
    data[i] = T(u < probs[i] ? 1.0f : 0.0f);
  }
}

Tensor newTensor(IntArrayRef size, ScalarType dtype, std::optional<Device> device) {
  return Tensor::empty(size, dtype, device.value_or(Device()));
}

} // namespace

Tensor rand(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = newTensor(size, dtype.value_or(ScalarType::Float32), device);
  uniformFill(t, 0.0, 1.0);
  return t;
}

Tensor randn(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = newTensor(size, dtype.value_or(ScalarType::Float32), device);
  normalFill(t, 0.0, 1.0);
  return t;
}

Tensor randint(int64_t high, IntArrayRef size, std::optional<ScalarType> dtype,
               std::optional<Device> device) {
  return randintLow(0, high, size, dtype, device);
}

Tensor randintLow(int64_t low, int64_t high, IntArrayRef size, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  Tensor t = newTensor(size, dtype.value_or(ScalarType::Int64), device);
  randomFromTo(t, low, high);
  return t;
}

Tensor randperm(int64_t n, std::optional<ScalarType> dtype, std::optional<Device> device) {
  ScalarType dt = dtype.value_or(ScalarType::Int64);
  if (dt == ScalarType::Bool) throwUnsupportedDtype("randperm", dt);
  Tensor t = newTensor({n}, dt, device);
  KILN_DISPATCH_NUMERIC(dt, "randperm", [&]<typename scalar_t>() {
    if (n > 0) checkedConvert<scalar_t>(Scalar(n - 1));
    if (t.isMeta() || n == 0) return;
    // Fisher-Yates, swap partner of position i from counter i of one draw.
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      perm[size_t(i)] = i;
    Generator::Draw draw = defaultGenerator().reserve(uint64_t(n));
    for (int64_t i = n - 1; i > 0; --i) {
      int64_t j = int64_t(word64(randomWords(draw, uint64_t(i)), 0) % uint64_t(i + 1));
      std::swap(perm[size_t(i)], perm[size_t(j)]);
    }
    scalar_t* data = t.data<scalar_t>();
    for (int64_t i = 0; i < n; ++i)
      data[i] = scalar_t(perm[size_t(i)]);
  });
  return t;
}

Tensor randLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = ops::empty_like(self, dtype, device);
  uniformFill(t, 0.0, 1.0);
  return t;
}

Tensor randnLike(const Tensor& self, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  Tensor t = ops::empty_like(self, dtype, device);
  normalFill(t, 0.0, 1.0);
  return t;
}

Tensor randintLike(const Tensor& self, int64_t high, std::optional<ScalarType> dtype,
                   std::optional<Device> device) {
  return randintLikeLow(self, 0, high, dtype, device);
}

Tensor randintLikeLow(const Tensor& self, int64_t low, int64_t high,
                      std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = ops::empty_like(self, dtype, device);
  randomFromTo(t, low, high);
  return t;
}

Tensor uniform_(const Tensor& self, double from, double to) {
  uniformFill(self, from, to);
  self.bumpVersion();
  return self;
}

Tensor normal_(const Tensor& self, double mean, double std) {
  normalFill(self, mean, std);
  self.bumpVersion();
  return self;
}

Tensor randomTo_(const Tensor& self, int64_t to) {
  randomFromTo(self, 0, to);
  self.bumpVersion();
  return self;
}

Tensor randomFrom_(const Tensor& self, int64_t from, std::optional<int64_t> to) {
  if (to) {
    randomFromTo(self, from, *to);
  } else {
    // No upper bound: up to the largest value the dtype holds (exactly, for floats).
    int64_t last = KILN_DISPATCH_ALL(self.dtype(), "random_", [&]<typename scalar_t>() {
      return randomBounds<scalar_t>().second;
    });
    randomFill(self, from, last, false);
  }
  self.bumpVersion();
  return self;
}

Tensor random_(const Tensor& self) { return randomFrom_(self, 0, std::nullopt); }

Tensor bernoulli_(const Tensor& self, double p) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  KILN_DISPATCH_ALL(self.dtype(), "bernoulli_", [&]<typename scalar_t>() {
    fillRandom<scalar_t>(self, [p](const Words& w) {
      double u = double(word64(w, 0) >> 11) * 0x1p-53;
      return scalar_t(u < p ? 1 : 0);
    });
  });
  self.bumpVersion();
  return self;
}

Tensor bernoulliP(const Tensor& self, double p) {
  Tensor t = ops::empty_like(self, std::nullopt, std::nullopt);
  return bernoulli_(t, p);
}

Tensor bernoulli(const Tensor& self) {
  checkFloating("bernoulli_tensor_cpu_p_", self.dtype());
  Tensor out = ops::empty_like(self, std::nullopt, std::nullopt);
  if (self.isMeta() || self.numel() == 0) return out;
  // Each element is 1 with the probability self holds there: read the probabilities in
  // row-major order, like the values fillRandom writes.
  Tensor p = ops::_to_copy(self, ScalarType::Float64, std::nullopt);
  const double* probs = p.data<double>();
  for (int64_t i = 0; i < p.numel(); ++i)
    KILN_CHECK(probs[i] >= 0.0 && probs[i] <= 1.0,
               "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
  Tensor dense = Tensor::empty(self.sizes(), self.dtype(), self.device());
  KILN_DISPATCH_FLOATING(self.dtype(), "bernoulli", [&]<typename scalar_t>() {
    bernoulliFill<scalar_t>(dense, p.data<double>());
  });
  ops::copy_(out, dense, false);
  return out;
}

} // namespace kiln::kernels
