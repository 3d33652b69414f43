// multinomial: category indices drawn from each row of non-negative weights, from the default
// generator's Philox stream (so the draws repeat after manual_seed; they cannot match PyTorch's
// mt19937 values, only the distribution). With replacement: inverse CDF of one uniform per
// sample. Without: the k largest w_i / E_i with E_i ~ Exp(1) (PyTorch's method, which draws a
// weighted sample without replacement in one pass).
#include <cstdint>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Generator.h"

namespace kiln::kernels {

namespace {

// Uniform in [0, 1) with 53 random bits.
double uniform53(const std::array<uint32_t, 4>& w) {
  uint64_t bits = (uint64_t(w[0]) << 32 | w[1]) >> 11;
  return double(bits) * 0x1p-53;
}

// Uniform in (0, 1): never 0, so Exp(1) = -log(u) is never 0 either.
double openUniform53(const std::array<uint32_t, 4>& w) {
  uint64_t bits = (uint64_t(w[0]) << 32 | w[1]) >> 11;
  return (double(bits) + 0.5) * 0x1p-53;
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
  Tensor w = ops::contiguous(ops::_to_copy(self, ScalarType::Float64));
  const double* p = w.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    for (int64_t c = 0; c < categories; ++c) {
      double v = p[r * categories + c];
      KILN_CHECK(std::isfinite(v) && v >= 0,
                 "probability tensor contains either `inf`, `nan` or element < 0");
      total += v;
    }
    KILN_CHECK(total > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
  }
  int64_t* o = out.data<int64_t>();
  const int64_t draws = replacement ? rows * numSamples : rows * categories;
  Generator::Draw draw = defaultGenerator().reserve(uint64_t(draws));
  int threads = rows * categories < 32768 || rows == 1 ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<double> work(static_cast<size_t>(categories));
    std::vector<int64_t> order(static_cast<size_t>(categories));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const double* row = p + r * categories;
      int64_t* dst = o + r * numSamples;
      if (replacement) {
        // cdf[c] = w_0 + ... + w_c; a sample is the first c with u * total < cdf[c].
        double acc = 0;
        for (int64_t c = 0; c < categories; ++c)
          work[size_t(c)] = acc += row[c];
        for (int64_t s = 0; s < numSamples; ++s) {
          double u = uniform53(randomWords(draw, uint64_t(r * numSamples + s))) * acc;
          auto it = std::upper_bound(work.begin(), work.end(), u);
          int64_t c = std::min<int64_t>(int64_t(it - work.begin()), categories - 1);
          while (row[c] == 0 && c > 0) --c; // rounding at the top must not pick a 0 weight
          dst[s] = c;
        }
      } else {
        for (int64_t c = 0; c < categories; ++c) {
          double e = -std::log(openUniform53(randomWords(draw, uint64_t(r * categories + c))));
          work[size_t(c)] = row[c] / e;
          order[size_t(c)] = c;
        }
        auto before = [&](int64_t a, int64_t b) {
          return work[size_t(a)] > work[size_t(b)] || (work[size_t(a)] == work[size_t(b)] && a < b);
        };
        std::partial_sort(order.begin(), order.begin() + numSamples, order.end(), before);
        std::copy(order.begin(), order.begin() + numSamples, dst);
      }
    }
  }
  return out;
}

} // namespace kiln::kernels
