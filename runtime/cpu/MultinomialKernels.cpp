// multinomial: category indices drawn from each row of non-negative weights, with PyTorch's CPU
// algorithms on the mt19937 generator (the same seed gives torch's samples). Without
// replacement, and for a single sample either way: the k largest w_i / E_i with E_i ~ Exp(1)
// drawn for the whole input first (torch's exponential_ then topk, which samples without
// replacement in one pass). With replacement: per row the normalized cumulative weights in the
// input's type (float for the 16-bit ones), then per sample one double uniform and a binary
// search for the first bucket not below it, the last bucket pinned to 1.
#include <cstdint>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Generator.h"

namespace kiln::kernels {

namespace {

double unitUniform53(Generator& g) { return double(g.random64() & ((uint64_t(1) << 53) - 1)) * 0x1p-53; }

// Without replacement: w / Exp(1) in the input's dtype (torch divides in place into the draw),
// then the numSamples largest per row, ties to the lower index.
template <typename T>
void sampleWithoutReplacement(const T* w, int64_t rows, int64_t categories, int64_t numSamples, int64_t* out) {
  int64_t n = rows * categories;
  std::vector<T> q(static_cast<size_t>(n));
  {
    Generator& g = defaultGenerator();
    std::lock_guard<std::mutex> lock(g.mutex());
    for (int64_t i = 0; i < n; ++i) // torch's exponential_distribution<double>(1), cast to T
      q[size_t(i)] = T(-std::log1p(-unitUniform53(g)));
  }
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t i = 0; i < n; ++i)
    q[size_t(i)] = T(M(w[i]) / M(q[size_t(i)]));
  std::vector<int64_t> order(static_cast<size_t>(categories));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = q.data() + r * categories;
    std::iota(order.begin(), order.end(), int64_t(0));
    auto before = [row](int64_t a, int64_t b) {
      double x = double(row[a]), y = double(row[b]);
      return x > y || (x == y && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + numSamples, order.end(), before);
    std::copy(order.begin(), order.begin() + numSamples, out + r * numSamples);
  }
}

// With replacement (numSamples > 1): torch's cumulative-distribution binary search. M is the
// type the cumulative sums are kept in.
template <typename T>
void sampleWithReplacement(const T* w, int64_t rows, int64_t categories, int64_t numSamples, int64_t* out) {
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  std::vector<M> cdf(static_cast<size_t>(categories));
  Generator& g = defaultGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  for (int64_t r = 0; r < rows; ++r) {
    M sum = 0;
    for (int64_t c = 0; c < categories; ++c)
      cdf[size_t(c)] = sum += M(w[r * categories + c]);
    for (M& v : cdf)
      v /= sum;
    cdf[size_t(categories - 1)] = 1;
    for (int64_t s = 0; s < numSamples; ++s) {
      double u = unitUniform53(g);
      auto it = std::lower_bound(cdf.begin(), cdf.end(), u, [](M c, double x) { return double(c) < x; });
      out[r * numSamples + s] = int64_t(it - cdf.begin());
    }
  }
}

} // namespace

Tensor multinomial(const Tensor& self, int64_t numSamples, bool replacement) {
  KILN_CHECK(isFloatingType(self.dtype()),
             "multinomial only supports floating-point dtypes for input, got: ",
             scalarTypeShortName(self.dtype()));
  KILN_CHECK(self.dim() == 1 || self.dim() == 2, "prob_dist must be 1 or 2 dim");
  KILN_CHECK(numSamples > 0, "cannot sample n_sample <= 0 samples");
  const int64_t categories = self.sizes()[size_t(self.dim() - 1)];
  KILN_CHECK(replacement || numSamples <= categories,
             "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  const int64_t rows = self.dim() == 1 ? 1 : self.sizes()[0];
  DimVector shape(self.sizes());
  shape[size_t(self.dim() - 1)] = numSamples;
  Tensor out = Tensor::empty(shape, ScalarType::Int64, self.device());
  if (self.isMeta() || out.numel() == 0) return out;
  Tensor w = ops::contiguous(self);
  KILN_DISPATCH_FLOATING(self.dtype(), "multinomial", [&]<typename scalar_t>() {
    const scalar_t* p = w.data<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      double total = 0;
      for (int64_t c = 0; c < categories; ++c) {
        double v = double(p[r * categories + c]);
        KILN_CHECK(std::isfinite(v) && v >= 0,
                   "probability tensor contains either `inf`, `nan` or element < 0");
        total += v;
      }
      KILN_CHECK(total > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
    }
    if (!replacement || numSamples == 1)
      sampleWithoutReplacement(p, rows, categories, numSamples, out.data<int64_t>());
    else
      sampleWithReplacement(p, rows, categories, numSamples, out.data<int64_t>());
  });
  return out;
}

} // namespace kiln::kernels
