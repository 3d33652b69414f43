// The oneDNN GEMM entry points (runtime/cpu/DnnlMatmul.h) against a plain loop: their primitive
// caches are per thread (oneDNN 2.6's matmul with post-ops is wrong when two threads run one
// primitive at once), so the tests call them from many threads at once and past the caches' bound.
#include <cstdint>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "runtime/cpu/DnnlMatmul.h"
#include "runtime/cpu/Gemm.h"

using namespace kiln::cpu;

namespace {

std::vector<float> filled(int64_t count, int seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = float((i * 7 + seed * 13) % 17) / 8.f - 1.f;
  return v;
}

// c = post(a @ b^T) for a [m, k], b [n, k] (the layout of x @ W.T), by the loop the runtime uses
// where oneDNN has no primitive.
std::vector<float> reference(int64_t m, int64_t n, int64_t k, const std::vector<float>& a,
                             const std::vector<float>& b, const PostOp* ops, int nops) {
  std::vector<float> c(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a[size_t(i * k + p)]) * b[size_t(j * k + p)];
      c[size_t(i * n + j)] = applyPostOps(float(s), ops, nops, i, j);
    }
  return c;
}

// The largest difference of one post-op GEMM of this shape from the reference.
float postOpsError(int64_t m, int64_t n, int64_t k, int seed) {
  std::vector<float> a = filled(m * k, seed), b = filled(n * k, seed + 1), bias = filled(n, seed + 2);
  std::vector<float> residual = filled(m * n, seed + 3), c(size_t(m * n), NAN);
  PostOp ops[] = {{PostOpKind::Add, 0, 0, bias.data(), 0},
                  {PostOpKind::GeluErf, 0, 0, nullptr, 0},
                  {PostOpKind::Add, 0, 0, residual.data(), n}};
  sgemmPostOps(false, true, m, n, k, a.data(), k, b.data(), k, c.data(), n, ops, 3);
  std::vector<float> want = reference(m, n, k, a, b, ops, 3);
  float err = 0;
  for (size_t i = 0; i < c.size(); ++i) err = std::max(err, std::isnan(c[i]) ? INFINITY : std::fabs(c[i] - want[i]));
  return err;
}

// The largest difference of one batched GEMM (a [batch, m, k] @ b^T, b [batch, n, k]).
float batchedError(int64_t batch, int64_t m, int64_t n, int64_t k, int seed) {
  std::vector<float> a = filled(batch * m * k, seed), b = filled(batch * n * k, seed + 1);
  std::vector<float> c(size_t(batch * m * n), NAN);
  sgemmBatched(false, true, batch, m, n, k, a.data(), k, m * k, b.data(), k, n * k, c.data(), n, m * n);
  float err = 0;
  for (int64_t e = 0; e < batch; ++e) {
    std::vector<float> ae(a.begin() + e * m * k, a.begin() + (e + 1) * m * k);
    std::vector<float> be(b.begin() + e * n * k, b.begin() + (e + 1) * n * k);
    std::vector<float> want = reference(m, n, k, ae, be, nullptr, 0);
    for (int64_t i = 0; i < m * n; ++i) {
      float got = c[size_t(e * m * n + i)];
      err = std::max(err, std::isnan(got) ? INFINITY : std::fabs(got - want[size_t(i)]));
    }
  }
  return err;
}

} // namespace

TEST(DnnlMatmul, ConcurrentCallsFromManyThreads) {
  // Several threads, each calling the same few geometries over and over with its own data (one
  // primitive object shared by the threads gave wrong products here), and a thread's memory
  // objects re-pointed per call.
  const int64_t shapes[][3] = {{8, 16, 32}, {33, 17, 9}, {64, 48, 40}};
  float worst = 0;
#pragma omp parallel num_threads(4) reduction(max : worst)
  for (int i = 0; i < 24; ++i) {
    const int64_t* s = shapes[(i + omp_get_thread_num()) % 3];
    worst = std::max(worst, postOpsError(s[0], s[1], s[2], i + 100 * omp_get_thread_num()));
    worst = std::max(worst, batchedError(3, s[0], s[1], s[2], i));
  }
  EXPECT_LT(worst, 1e-4f);
}

TEST(DnnlMatmul, ResultsStayRightPastTheCacheBound) {
  // More geometries than the cache keeps (512), then the first ones again: rebuilt primitives
  // compute the same products.
  float worst = 0;
  for (int64_t m = 1; m <= 600; ++m) worst = std::max(worst, postOpsError(m, 3, 2, int(m)));
  for (int64_t m = 1; m <= 8; ++m) worst = std::max(worst, postOpsError(m, 3, 2, int(m) + 1));
  EXPECT_LT(worst, 1e-4f);
}

TEST(DnnlMatmul, ShortInnerDimensionsStayOnOneThreadLonger) {
  // gemmThreads: a product with k <= 16 is mostly the writing of C; two threads pay off only
  // from about 2M multiply-adds (an MLP's input gradient from 10 logits stays on one).
  int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  EXPECT_EQ(gemmThreads(128, 512, 10), 1);
  EXPECT_EQ(gemmThreads(256, 512, 10), 1);
  EXPECT_EQ(gemmThreads(128, 512, 16), 1);
  EXPECT_EQ(gemmThreads(512, 512, 10), 2);
  EXPECT_EQ(gemmThreads(128, 512, 32), 2);
  EXPECT_EQ(gemmThreads(64, 64, 64), 1);
  EXPECT_EQ(gemmThreads(128, 128, 128), 2);
  omp_set_num_threads(saved);
}

TEST(DnnlMatmul, SgemmOfATransposedWeightThroughThePrimitive) {
  // x @ W.T with few rows or columns runs as the matmul primitive on more than one thread
  // (preferMatmulPrimitive): padded leading dimensions, and a result it must not read (NaN).
  int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  EXPECT_TRUE(preferMatmulPrimitive(false, true, 2048, 512, 2048));
  EXPECT_TRUE(preferMatmulPrimitive(false, true, 300, 1024, 96));
  EXPECT_FALSE(preferMatmulPrimitive(false, true, 2048, 1024, 512)); // dnnl_sgemm is faster there
  EXPECT_FALSE(preferMatmulPrimitive(false, false, 2048, 512, 2048));
  EXPECT_FALSE(preferMatmulPrimitive(true, true, 2048, 512, 2048));
  EXPECT_FALSE(preferMatmulPrimitive(false, true, 8, 8, 8)); // one thread
  const int64_t shapes[][3] = {{300, 200, 96}, {96, 700, 130}, {1, 520, 700}};
  for (const auto& s : shapes) {
    int64_t m = s[0], n = s[1], k = s[2], lda = k + 3, ldb = k + 5, ldc = n + 2;
    EXPECT_TRUE(preferMatmulPrimitive(false, true, m, n, k)) << m << "x" << n << "x" << k;
    std::vector<float> a = filled(m * lda, 1), b = filled(n * ldb, 2), c(size_t(m * ldc), NAN);
    sgemm(false, true, m, n, k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), ldc);
    float err = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) want += double(a[size_t(i * lda + p)]) * b[size_t(j * ldb + p)];
        float got = c[size_t(i * ldc + j)];
        err = std::max(err, std::isnan(got) ? INFINITY : float(std::fabs(got - want)));
      }
    EXPECT_LT(err, 1e-3f) << m << "x" << n << "x" << k;
  }
  omp_set_num_threads(saved);
}
