// Random sampling: rand, randn, randint, randperm, the *_like variants, uniform_, normal_,
// exponential_, geometric_, cauchy_, log_normal_, poisson,
// random_ and bernoulli, with PyTorch's CPU algorithms on the mt19937 generator
// (runtime/Generator.h): for the same seed they give torch's values. Each op takes the
// generator's lock once and draws sequentially in TensorIterator order (memory order), as
// torch's cpu_serial_kernel does. float normal_ follows torch's AVX2 kernel (the x86 wheel's). This file is built with -ffp-contract=off: where torch's build
// fuses a multiply-add (uniform's u * span + from), the code says std::fma.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/DefaultDtype.h"
#include "runtime/CheckedConvert.h"
#include "runtime/CppTypeName.h"
#include "runtime/Generator.h"

namespace kiln::kernels {

namespace {

// The type torch computes a draw of T in (its dist_acctype): double for double, float else.
template <typename T> using DrawMath = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The mantissa bits of T (1 + stored bits).
template <typename T> constexpr int mantissaDigits() {
  if constexpr (std::is_same_v<T, Half>)
    return 11;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return 8;
  else
    return std::numeric_limits<T>::digits;
}

// torch's uniform_real_distribution<M>(0, 1): the low 24 bits of one output for float, the low
// 53 bits of random64() for double, times 2^-digits.
template <typename M> M unitUniform(Generator& g) {
  if constexpr (std::is_same_v<M, double>)
    return double(g.random64() & ((uint64_t(1) << 53) - 1)) * 0x1p-53;
  else
    return float(g.random() & ((1u << 24) - 1)) * 0x1p-24f;
}

// Runs fill(data, n, generator) over t's elements in TensorIterator's order for a lone output:
// memory order (dims sorted by decreasing stride), in place when that view is dense, through a
// dense temporary copied back otherwise. The generator's lock is held for the whole fill.
std::vector<int64_t> memoryOrder(const Tensor& t) {
  std::vector<int64_t> dims(size_t(t.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::stable_sort(dims.begin(), dims.end(), [&t](int64_t a, int64_t b) {
    return t.strides()[size_t(a)] > t.strides()[size_t(b)];
  });
  return dims;
}

template <typename T, typename F> void fillInOrder(const Tensor& t, const F& fill) {
  if (t.isMeta() || t.numel() == 0) return;
  Generator& g = defaultGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  if (t.isContiguous()) {
    fill(t.data<T>(), t.numel(), g);
    return;
  }
  Tensor view = ops::permute(t, memoryOrder(t));
  Tensor target = view.isContiguous() ? view : Tensor::empty(view.sizes(), t.dtype(), t.device());
  fill(target.data<T>(), t.numel(), g);
  if (!target.isSame(view)) ops::copy_(view, target, false);
}

// Writes value(generator) into every element of t, in order.
template <typename T, typename F> void fillSerial(const Tensor& t, const F& value) {
  fillInOrder<T>(t, [&value](T* data, int64_t n, Generator& g) {
    for (int64_t i = 0; i < n; ++i)
      data[i] = value(g);
  });
}

// torch's x86 wheel runs normal_ on its AVX2 kernel (normal_stub has no AVX512 one), whose
// Box-Muller takes log and sincos from Pommier's avx_mathfun (Cephes' logf and sinf/cosf
// polynomials), compiled with FMA contraction. These scalar versions round step by step as that
// build does (checked bit for bit against it on every float input [0, 1) the kernel can see);
// libm's logf/cosf would differ by an ulp in about 1% of the values.
inline uint32_t floatBits(float f) { return std::bit_cast<uint32_t>(f); }

[[gnu::always_inline]] inline float cephesLog(float x) {
  bool invalid = !(x > 0.0f); // NaN, as the kernel's mask; branch-free so the loop vectorizes
  uint32_t b = floatBits(std::max(x, std::numeric_limits<float>::min()));
  // x = m * 2^e with m in [0.5, 1); below sqrt(1/2) m is doubled so that m - 1 stays small.
  float e = float(int32_t(b >> 23) - 127) + 1.0f;
  float m = std::bit_cast<float>((b & ~0x7f800000u) | floatBits(0.5f));
  bool low = m < float(0.707106781186547524);
  e = e - (low ? 1.0f : 0.0f);
  float t = (m - 1.0f) + (low ? m : 0.0f);
  constexpr float p[9] = {float(7.0376836292E-2), float(-1.1514610310E-1), float(1.1676998740E-1),
                          float(-1.2420140846E-1), float(1.4249322787E-1), float(-1.6668057665E-1),
                          float(2.0000714765E-1), float(-2.4999993993E-1), float(3.3333331174E-1)};
  float z = t * t, y = p[0];
  for (int k = 1; k < 9; ++k)
    y = std::fma(y, t, p[k]);
  y = std::fma(y * t, z, e * float(-2.12194440e-4));
  y = std::fma(-z, 0.5f, y);
  float r = std::fma(e, 0.693359375f, t + y); // ln 2 split in two parts: 0.693359375 - 2.12e-4
  return invalid ? std::numeric_limits<float>::quiet_NaN() : r;
}

[[gnu::always_inline]] inline void cephesSinCos(float x, float& sine, float& cosine) {
  uint32_t signSin = floatBits(x) & 0x80000000u;
  x = std::fabs(x);
  // j: the even octant count of x / (pi/4); x is reduced by j pi/4 in three exact-ish parts.
  int32_t j = (int32_t(x * float(1.27323954473516)) + 1) & ~1;
  float y = float(j);
  signSin ^= uint32_t(j & 4) << 29;
  uint32_t signCos = uint32_t(~(j - 2) & 4) << 29;
  bool sinPoly = (j & 2) == 0;
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, float(-2.4187564849853515625e-4), x);
  x = std::fma(y, float(-3.77489497744594108e-8), x);
  float z = x * x;
  float yc = std::fma(float(2.443315711809948E-005), z, float(-1.388731625493765E-003));
  yc = std::fma(yc, z, float(4.166664568298827E-002));
  yc = std::fma(yc * z, z, -(z * 0.5f)) + 1.0f;
  float ys = std::fma(float(-1.9515295891E-4), z, float(8.3321608736E-3));
  ys = std::fma(ys, z, float(-1.6666654611E-1));
  ys = std::fma(ys * z, x, x);
  // The kernel blends the two polynomials by adding a masked zero: -0 comes out as +0.
  float s = (sinPoly ? ys : yc) + 0.0f, c = (sinPoly ? yc : ys) + 0.0f;
  sine = std::bit_cast<float>(floatBits(s) ^ signSin);
  cosine = std::bit_cast<float>(floatBits(c) ^ signCos);
}

// torch's normal_fill_16: Box-Muller on 16 uniforms, the first 8 giving the radius and the last
// 8 the angle, the cosines written to the first half and the sines to the second. Float (and
// the 16-bit types, computed in float) as the AVX2 kernel; double as the generic one (libm).
template <typename M> void normalFill16(M* data, M mean, M std) {
  if constexpr (std::is_same_v<M, float>) {
    // Element-wise IEEE operations only (explicit fma): vectorizing cannot change a bit.
    float radius[8], sine[8], cosine[8];
#pragma omp simd
    for (int j = 0; j < 8; ++j)
      radius[j] = std::sqrt(-2.0f * cephesLog(1.0f - data[j]));
#pragma omp simd
    for (int j = 0; j < 8; ++j)
      cephesSinCos(float(2.0 * std::numbers::pi) * data[j + 8], sine[j], cosine[j]);
#pragma omp simd
    for (int j = 0; j < 8; ++j) {
      data[j] = std::fma(radius[j] * cosine[j], std, mean);
      data[j + 8] = std::fma(radius[j] * sine[j], std, mean);
    }
  } else {
    for (int j = 0; j < 8; ++j) {
      M u1 = 1 - data[j], u2 = data[j + 8];
      M radius = std::sqrt(-2 * std::log(u1));
      M theta = M(2.0f * std::numbers::pi_v<double> * u2);
      data[j] = std::fma(radius * std::cos(theta), std, mean);
      data[j + 8] = std::fma(radius * std::sin(theta), std, mean);
    }
  }
}

// torch's normal_fill for contiguous tensors of >= 16 elements: all uniforms first, Box-Muller in
// blocks of 16, and a ragged tail redrawn as the last 16 elements. 16-bit types draw and
// transform each block in float.
template <typename T> void normalFillBlocks(T* data, int64_t n, Generator& g, double mean, double std) {
  using M = DrawMath<T>;
  M mu = M(mean), sigma = M(std);
  if constexpr (std::is_same_v<T, M>) {
    for (int64_t i = 0; i < n; ++i)
      data[i] = unitUniform<M>(g);
    for (int64_t i = 0; i + 16 <= n; i += 16)
      normalFill16(data + i, mu, sigma);
    if (n % 16 != 0) {
      for (int64_t i = n - 16; i < n; ++i)
        data[i] = unitUniform<M>(g);
      normalFill16(data + n - 16, mu, sigma);
    }
  } else {
    M buf[16];
    auto block = [&](int64_t at) {
      for (M& b : buf)
        b = unitUniform<M>(g);
      normalFill16(buf, mu, sigma);
      for (int j = 0; j < 16; ++j)
        data[at + j] = T(buf[j]);
    };
    for (int64_t i = 0; i + 16 <= n; i += 16)
      block(i);
    if (n % 16 != 0) block(n - 16);
  }
}

// torch's normal_distribution<double>: one Box-Muller pair from two double uniforms, the sine
// kept in the generator for the next call.
double normalSample(Generator& g, double mean, double std) {
  std::optional<double>& cached = g.nextDoubleNormal();
  double z;
  if (cached) {
    z = *cached;
    cached.reset();
  } else {
    double u1 = unitUniform<double>(g), u2 = unitUniform<double>(g);
    double r = std::sqrt(-2.0 * std::log1p(-u2)), theta = 2.0 * std::numbers::pi * u1;
    cached = r * std::sin(theta);
    z = r * std::cos(theta);
  }
  return std::fma(z, std, mean);
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
    using M = DrawMath<scalar_t>;
    M lo = M(from), span = M(to) - M(from);
    scalar_t toT = scalar_t(to), fromT = scalar_t(from);
    // A value that rounds up to `to` becomes `from`: the range stays half-open.
    fillSerial<scalar_t>(t, [=](Generator& g) {
      scalar_t v = scalar_t(std::fma(unitUniform<M>(g), span, lo));
      return v == toT ? fromT : v;
    });
  });
}

void normalFill(const Tensor& t, double mean, double std) {
  KILN_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  checkFloating("normal_kernel_cpu", t.dtype());
  KILN_DISPATCH_FLOATING(t.dtype(), "normal_", [&]<typename scalar_t>() {
    if (t.numel() >= 16 && t.isContiguous()) {
      fillInOrder<scalar_t>(t, [=](scalar_t* data, int64_t n, Generator& g) {
        normalFillBlocks(data, n, g, mean, std);
      });
    } else {
      fillSerial<scalar_t>(t, [=](Generator& g) { return scalar_t(normalSample(g, mean, std)); });
    }
  });
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

template <typename T> T fromInt64(int64_t v) {
  if constexpr (std::is_same_v<T, bool>)
    return v != 0;
  else if constexpr (std::is_integral_v<T> || std::is_same_v<T, double>)
    return T(v);
  else
    return T(float(v));
}

// Fills t with integers uniform in [from, last] (both included), PyTorch's bound checks first.
// torch's uniform_int_from_to_distribution: one output modulo the range below 2^28, random64()
// from there on (all 64 bits when the range is the whole of uint64).
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
    fillSerial<scalar_t>(t, [from, range](Generator& g) {
      uint64_t r = range == 0 || range >= (uint64_t(1) << 28) ? g.random64() : g.random();
      return fromInt64<scalar_t>(int64_t(uint64_t(from) + (range == 0 ? r : r % range)));
    });
  });
}

void randomFromTo(const Tensor& t, int64_t from, int64_t to) {
  KILN_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from,
             " >= to=", to);
  randomFill(t, from, to - 1, true);
}

// A uniform double in [0, 1) below p (torch's bernoulli_distribution<double>).
bool bernoulliDraw(Generator& g, double p) { return unitUniform<double>(g) < p; }

// A double draw as torch's static_cast<scalar_t>: the 16-bit types round through float.
template <typename T> T fromDouble(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(float(v));
  else
    return T(v);
}

// Fills t (floating types) with f(generator) computed in double, one draw per element in order.
template <typename F> void fillDoubleDraws(const Tensor& t, const char* kernel, const F& draw) {
  KILN_DISPATCH_FLOATING(t.dtype(), kernel, [&]<typename scalar_t>() {
    fillSerial<scalar_t>(t, [&draw](Generator& g) { return fromDouble<scalar_t>(draw(g)); });
  });
}

// torch's sample_poisson (after NumPy's): the transformed rejection method (Hormann 1993) from a
// rate of 10, else the product of uniforms until it falls below exp(-rate).
int64_t poissonSample(Generator& g, double rate) {
  if (rate >= 10) {
    double slam = std::sqrt(rate), loglam = std::log(rate);
    double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
    double invalpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
    while (true) {
      double u = unitUniform<double>(g) - 0.5, v = unitUniform<double>(g);
      double us = 0.5 - std::fabs(u);
      auto k = int64_t(std::floor((2 * a / us + b) * u + rate + 0.43));
      if (us >= 0.07 && v <= vr) return k;
      if (k < 0 || (us < 0.013 && v > us)) continue;
      if (std::log(v) + std::log(invalpha) - std::log(a / (us * us) + b) <=
          -rate + double(k) * loglam - std::lgamma(double(k) + 1))
        return k;
    }
  }
  if (rate == 0) return 0;
  double limit = std::exp(-rate), prod = 1.0;
  int64_t x = 0;
  while (true) {
    prod *= unitUniform<double>(g);
    if (prod <= limit) return x;
    ++x;
  }
}

Tensor newTensor(IntArrayRef size, ScalarType dtype, std::optional<Device> device) {
  return Tensor::empty(size, dtype, device.value_or(Device()));
}

} // namespace

Tensor rand(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = newTensor(size, dtype.value_or(defaultFloatType()), device);
  uniformFill(t, 0.0, 1.0);
  return t;
}

Tensor randn(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = newTensor(size, dtype.value_or(defaultFloatType()), device);
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

// torch's randperm_cpu: a forward Fisher-Yates swap loop (position i swaps with i + one output
// modulo n - i); from n >= 2^32 / 20 the inside-out variant on random64(), whose modulo bias
// stays negligible.
Tensor randperm(int64_t n, std::optional<ScalarType> dtype, std::optional<Device> device) {
  ScalarType dt = dtype.value_or(ScalarType::Int64);
  if (dt == ScalarType::Bool) throwUnsupportedDtype("randperm", dt);
  KILN_CHECK(n >= 0, "n must be non-negative, got", n);
  Tensor t = newTensor({n}, dt, device);
  KILN_DISPATCH_NUMERIC(dt, "randperm", [&]<typename scalar_t>() {
    if (n > 0) checkedConvert<scalar_t>(Scalar(n - 1));
    if (t.isMeta() || n == 0) return;
    std::vector<int64_t> perm(static_cast<size_t>(n));
    Generator& g = defaultGenerator();
    {
      std::lock_guard<std::mutex> lock(g.mutex());
      if (n < int64_t(std::numeric_limits<uint32_t>::max() / 20)) {
        std::iota(perm.begin(), perm.end(), int64_t(0));
        for (int64_t i = 0; i < n - 1; ++i)
          std::swap(perm[size_t(i)], perm[size_t(i + int64_t(g.random() % uint64_t(n - i)))]);
      } else {
        for (int64_t i = 0; i < n; ++i) {
          int64_t z = int64_t(g.random64() % uint64_t(i + 1));
          perm[size_t(i)] = perm[size_t(z)];
          perm[size_t(z)] = i;
        }
      }
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

// random_(from, None): [from, the largest value the dtype holds] (torch's random_from_to with no
// upper bound); from = int64 min with no bound is the full 64-bit range.
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

// random_() with no bounds: torch's uniform_int_distribution, one output (random64() for int64
// and double) modulo max + 1 of integers, 2^digits + 1 of floats; bool takes the low bit.
Tensor random_(const Tensor& self) {
  KILN_DISPATCH_ALL(self.dtype(), "random_", [&]<typename scalar_t>() {
    constexpr bool wide = std::is_same_v<scalar_t, double> || std::is_same_v<scalar_t, int64_t>;
    constexpr uint64_t modulus = std::is_integral_v<scalar_t>
                                     ? uint64_t(std::numeric_limits<scalar_t>::max()) + 1
                                     : (uint64_t(1) << mantissaDigits<scalar_t>()) + 1;
    fillSerial<scalar_t>(self, [](Generator& g) {
      uint64_t r = wide ? g.random64() : g.random();
      if constexpr (std::is_same_v<scalar_t, bool>)
        return bool(r & 1);
      else
        return fromInt64<scalar_t>(int64_t(r % modulus));
    });
  });
  self.bumpVersion();
  return self;
}

Tensor bernoulli_(const Tensor& self, double p) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  KILN_DISPATCH_ALL(self.dtype(), "bernoulli_", [&]<typename scalar_t>() {
    fillSerial<scalar_t>(self, [p](Generator& g) { return scalar_t(bernoulliDraw(g, p) ? 1 : 0); });
  });
  self.bumpVersion();
  return self;
}

Tensor bernoulliP(const Tensor& self, double p) {
  Tensor t = ops::empty_like(self, std::nullopt, std::nullopt);
  return bernoulli_(t, p);
}

// Each element is 1 with the probability self holds there (torch's bernoulli_tensor kernel): a
// float uniform against float probabilities (the 16-bit ones too), a double one against double.
Tensor bernoulli(const Tensor& self) {
  checkFloating("bernoulli_tensor_cpu_p_", self.dtype());
  Tensor out = ops::empty_like(self, std::nullopt, std::nullopt);
  if (self.isMeta() || self.numel() == 0) return out;
  bool wide = self.dtype() == ScalarType::Float64;
  // The probabilities in the order the output is filled (its memory order).
  Tensor probs = ops::contiguous(ops::_to_copy(ops::permute(self, memoryOrder(out)),
                                               wide ? ScalarType::Float64 : ScalarType::Float32,
                                               std::nullopt));
  KILN_DISPATCH_FLOATING(self.dtype(), "bernoulli", [&]<typename scalar_t>() {
    auto draw = [&]<typename P>(const P* pv) {
      for (int64_t i = 0; i < probs.numel(); ++i)
        KILN_CHECK(pv[i] >= 0 && pv[i] <= 1, "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
      int64_t i = 0;
      fillSerial<scalar_t>(out, [&](Generator& g) {
        return scalar_t(unitUniform<P>(g) < pv[i++] ? 1.0f : 0.0f);
      });
    };
    if (wide)
      draw(probs.data<double>());
    else
      draw(probs.data<float>());
  });
  return out;
}

// The distributions below follow torch's CPU kernels: a double uniform in [0, 1) (53 bits), or
// torch's cached double normal, transformed in double and cast to the tensor's dtype.
Tensor exponential_(const Tensor& self, double lambd) {
  KILN_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  KILN_CHECK(isFloatingType(self.dtype()), "Exponential distribution is a continuous probability "
             "distribution. dtype must be a floating point but you specified ", cppTypeName(self.dtype()));
  fillDoubleDraws(self, "exponential_cpu", [lambd](Generator& g) {
    return -1.0 / lambd * std::log1p(-unitUniform<double>(g));
  });
  self.bumpVersion();
  return self;
}

// The number of Bernoulli(p) trials up to the first success: ceil(log(u) / log(1 - p)).
Tensor geometric_(const Tensor& self, double p) {
  KILN_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  if (self.numel() == 0) return self; // torch returns before choosing a kernel for the dtype
  KILN_DISPATCH_NUMERIC(self.dtype(), "geometric_cpu", [&]<typename scalar_t>() {
    fillSerial<scalar_t>(self, [p](Generator& g) {
      return fromDouble<scalar_t>(std::ceil(std::log(unitUniform<double>(g)) / std::log1p(-p)));
    });
  });
  self.bumpVersion();
  return self;
}

Tensor cauchy_(const Tensor& self, double median, double sigma) {
  KILN_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  KILN_CHECK(isFloatingType(self.dtype()), "Cauchy distribution is a continuous probability "
             "distribution. dtype must be a floating point but you specified ", cppTypeName(self.dtype()));
  fillDoubleDraws(self, "cauchy_cpu", [median, sigma](Generator& g) {
    return median + sigma * std::tan(std::numbers::pi * (unitUniform<double>(g) - 0.5));
  });
  self.bumpVersion();
  return self;
}

// exp of torch's normal_distribution<double>(mean, std): the Box-Muller pair's second value is
// kept for the next draw, as normal_ does for small tensors.
Tensor logNormal_(const Tensor& self, double mean, double std) {
  KILN_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  if (self.numel() == 0) return self;
  fillDoubleDraws(self, "log_normal_cpu", [mean, std](Generator& g) {
    return std::exp(normalSample(g, mean, std));
  });
  self.bumpVersion();
  return self;
}

// Each element a count drawn with the rate self holds there (torch's _s_poisson_cpu): in the
// order of the (contiguous) result, in the input's floating dtype.
Tensor poisson(const Tensor& self) {
  if (!isFloatingType(self.dtype())) throwUnsupportedDtype("poisson_cpu", self.dtype());
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (self.isMeta() || self.numel() == 0) return out;
  Tensor rates = ops::contiguous(ops::_to_copy(self, ScalarType::Float64, std::nullopt));
  const double* rate = rates.data<double>();
  for (int64_t i = 0; i < rates.numel(); ++i)
    KILN_CHECK(rate[i] >= 0, "invalid Poisson rate, expected rate to be non-negative");
  int64_t i = 0;
  fillDoubleDraws(out, "poisson_cpu", [&](Generator& g) { return double(poissonSample(g, rate[i++])); });
  return out;
}

} // namespace kiln::kernels
