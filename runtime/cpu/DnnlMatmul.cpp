// Float32 GEMMs with fused post-ops through oneDNN's matmul primitive (see DnnlMatmul.h).
#include "runtime/cpu/DnnlMatmul.h"

#include <cstdint>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/Half.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KilnMath.h"

namespace kiln::cpu {

namespace {

using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

int64_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return int64_t(u);
}

memory::desc matrix(int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride) {
  return memory::desc({rows, cols}, memory::data_type::f32, memory::dims{rowStride, colStride});
}

dnnl::algorithm eltwiseOf(PostOpKind k) {
  using A = dnnl::algorithm;
  switch (k) {
  case PostOpKind::Linear: return A::eltwise_linear;
  case PostOpKind::Relu: return A::eltwise_relu;
  case PostOpKind::GeluErf: return A::eltwise_gelu_erf;
  case PostOpKind::GeluTanh: return A::eltwise_gelu_tanh;
  case PostOpKind::Tanh: return A::eltwise_tanh;
  case PostOpKind::Sigmoid: return A::eltwise_logistic;
  case PostOpKind::Silu: return A::eltwise_swish;
  case PostOpKind::Exp: return A::eltwise_exp;
  case PostOpKind::Abs: return A::eltwise_abs;
  case PostOpKind::Sqrt: return A::eltwise_sqrt;
  default: return A::undef;
  }
}

dnnl::algorithm binaryOf(PostOpKind k) {
  using A = dnnl::algorithm;
  switch (k) {
  case PostOpKind::Add: return A::binary_add;
  case PostOpKind::Sub: return A::binary_sub;
  case PostOpKind::Mul: return A::binary_mul;
  case PostOpKind::Div: return A::binary_div;
  case PostOpKind::Max: return A::binary_max;
  case PostOpKind::Min: return A::binary_min;
  default: return A::undef;
  }
}

bool isBinary(PostOpKind k) { return int(k) >= int(PostOpKind::Add); }

// A primitive, with the descriptors of its arguments in the order the callers pass their pointers
// (src, weights, dst, then each binary post-op's tensor).
struct Primitive {
  dnnl::primitive primitive;
  std::vector<std::pair<int, memory::desc>> args;
};

using Key = std::vector<int64_t>;

struct KeyHash {
  size_t operator()(const Key& key) const noexcept {
    size_t h = key.size();
    for (int64_t v : key) h ^= size_t(v) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h;
  }
};

// A CPU stream is only an in-order queue: every call on one thread can share one.
dnnl::stream& threadStream() {
  thread_local dnnl::stream stream(engine());
  return stream;
}

// A cached primitive of the calling thread: memory objects made once on its descriptors, whose
// data pointers each call swaps in, and the argument map execute() reads. A call that hits this
// cache takes no lock and allocates nothing (a stream, an argument map and the memory objects per
// call were most of a small product's time: bench numbers in the commit). Each thread builds its
// own primitives: oneDNN 2.6's matmul with post-ops computes wrong results when two threads run
// one primitive object at once (found by DnnlMatmulTest's concurrent calls against the cache
// shared by all threads that kiln had before).
struct Bound {
  std::unique_ptr<Primitive> primitive; // null: oneDNN has no primitive for this key
  std::vector<memory> memories;         // aligned with primitive->args
  std::unordered_map<int, memory> args;

  explicit operator bool() const { return primitive != nullptr; }

  // Runs the primitive on these pointers (one per entry of primitive->args, in its order),
  // waiting for it.
  void run(const void* const* pointers) {
    for (size_t i = 0; i < memories.size(); ++i) memories[i].set_data_handle(const_cast<void*>(pointers[i]));
    dnnl::stream& stream = threadStream();
    primitive->primitive.execute(stream, args);
    stream.wait();
  }
};

// The calling thread's primitive for this key, built on its first use (`make` returns nullptr
// where oneDNN has none, remembered as such).
template <typename Make> Bound& boundPrimitive(const Key& key, Make&& make) {
  thread_local std::unordered_map<Key, Bound, KeyHash> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 512) cache.clear(); // a bound, not an LRU: shapes rarely churn
  Bound b;
  try {
    b.primitive = make();
  } catch (const dnnl::error&) {
    b.primitive = nullptr; // the caller's plain path runs
  }
  if (b.primitive)
    for (const auto& [arg, desc] : b.primitive->args) {
      b.memories.emplace_back(desc, engine(), static_cast<void*>(DNNL_MEMORY_NONE));
      b.args.emplace(arg, b.memories.back());
    }
  return cache.emplace(key, std::move(b)).first->second;
}

// The calling thread's reusable key (filled per call: no allocation once it has grown).
Key& scratchKey() {
  thread_local Key key;
  key.clear();
  return key;
}

// The primitive for one call's geometry (sgemmPostOps), built once.
Bound& primitiveFor(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                    const PostOp* ops, int nops, int threads) {
  Key& key = scratchKey();
  key.insert(key.end(), {0, ta, tb, m, n, k, lda, ldb, ldc, threads});
  for (int i = 0; i < nops; ++i)
    key.insert(key.end(), {int64_t(ops[i].kind), floatBits(ops[i].alpha), floatBits(ops[i].beta),
                           isBinary(ops[i].kind) ? ops[i].rowStride : -1});
  return boundPrimitive(key, [&]() -> std::unique_ptr<Primitive> {
    // oneDNN 2.6 gives every linear post-op the first one's constants: the plain path runs those.
    int linears = 0;
    for (int i = 0; i < nops; ++i) linears += ops[i].kind == PostOpKind::Linear;
    if (linears > 1) return nullptr;
    memory::desc a = ta ? matrix(m, k, 1, lda) : matrix(m, k, lda, 1);
    memory::desc b = tb ? matrix(k, n, 1, ldb) : matrix(k, n, ldb, 1);
    memory::desc c = matrix(m, n, ldc, 1);
    auto p = std::make_unique<Primitive>();
    p->args = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    dnnl::post_ops post;
    for (int i = 0; i < nops; ++i) {
      const PostOp& op = ops[i];
      if (isBinary(op.kind)) {
        memory::desc d = op.rowStride == 0 ? matrix(1, n, n, 1) : matrix(m, n, op.rowStride, 1);
        post.append_binary(binaryOf(op.kind), d);
        p->args.emplace_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1, d);
      } else {
        float alpha = op.kind == PostOpKind::Linear ? op.alpha : op.kind == PostOpKind::Silu ? 1.f : 0.f;
        float beta = op.kind == PostOpKind::Linear ? op.beta : 0.f;
        post.append_eltwise(1.f, eltwiseOf(op.kind), alpha, beta);
      }
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(post);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
    // Without AVX-512 oneDNN 2.6 has no brgemm matmul: its "gemm:jit" is dnnl_sgemm followed
    // by a second parallel pass over C for the post-ops, slower than splitGemmPostOps's
    // single-threaded GEMMs in one parallel region, each followed by the vectorized post-ops on
    // its block while it is in cache (bench numbers in the commit that chose this).
    if (std::strncmp(pd.impl_info_str(), "brg", 3) != 0) return nullptr;
    p->primitive = dnnl::matmul(pd);
    return p;
  });
}

// A [batch, rows, cols] operand: row-major with leading dimension ld, or column-major
// (transposed) with it; a batch stride of 0 is one matrix broadcast over the batch.
memory::desc batchedMatrix(int64_t batch, int64_t rows, int64_t cols, int64_t ld, bool transposed,
                           int64_t batchStride, memory::data_type type) {
  memory::dims strides = transposed ? memory::dims{batchStride, 1, ld} : memory::dims{batchStride, ld, 1};
  if (batchStride == 0) {
    batch = 1;
    strides[0] = rows * cols;
  }
  return memory::desc({batch, rows, cols}, type, strides);
}

// A batched primitive (sgemmBatched, bf16GemmBatched): not made where oneDNN has none, or only
// its reference one (scalar loops: a bfloat16 product on a CPU without AVX-512 BF16 would be
// slower than widening to float32).
Bound& batchedPrimitiveFor(memory::data_type type, memory::data_type out, bool ta, bool tb, int64_t batch,
                           int64_t m, int64_t n, int64_t k, int64_t lda, int64_t sa, int64_t ldb, int64_t sb,
                           int64_t ldc, int64_t sc, int threads) {
  Key& key = scratchKey();
  key.insert(key.end(), {1, int64_t(type), int64_t(out), ta, tb, batch, m, n, k, lda, sa, ldb, sb, ldc, sc, threads});
  return boundPrimitive(key, [&]() -> std::unique_ptr<Primitive> {
    memory::desc a = batchedMatrix(batch, m, k, lda, ta, sa, type);
    memory::desc b = batchedMatrix(batch, k, n, ldb, tb, sb, type);
    memory::desc c = batchedMatrix(batch, m, n, ldc, false, sc, out);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine());
    if (std::string(pd.impl_info_str()).starts_with("ref")) return nullptr;
    auto p = std::make_unique<Primitive>();
    p->args = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    p->primitive = dnnl::matmul(pd);
    return p;
  });
}

} // namespace

void sgemmBatched(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, const float* a,
                  int64_t lda, int64_t strideA, const float* b, int64_t ldb, int64_t strideB,
                  float* c, int64_t ldc, int64_t strideC) {
  if (batch == 1 || strideC == 0) {
    for (int64_t i = 0; i < batch; ++i)
      sgemm(ta, tb, m, n, k, 1.f, a + i * strideA, lda, b + i * strideB, ldb, 0.f, c + i * strideC, ldc);
    return;
  }
  bool nested = omp_in_parallel();
  int threads = nested ? 1 : std::min(gemmThreads(batch * m, n, k), omp_get_max_threads());
  bool done = false;
  withThreads(threads, [&] {
    Bound& mm = batchedPrimitiveFor(memory::data_type::f32, memory::data_type::f32, ta, tb, batch, m, n, k, lda,
                                    strideA, ldb, strideB, ldc, strideC, threads);
    if (!mm) return;
    const void* pointers[] = {a, b, c};
    mm.run(pointers);
    done = true;
  });
  if (done) return;
  // A GEMM inside a parallel region runs on its calling thread (Gemm.h).
#pragma omp parallel for num_threads(threads) if (!nested && batch >= threads && threads > 1)
  for (int64_t i = 0; i < batch; ++i)
    sgemm(ta, tb, m, n, k, 1.f, a + i * strideA, lda, b + i * strideB, ldb, 0.f, c + i * strideC, ldc);
}

bool bf16GemmBatched(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, const uint16_t* a,
                     int64_t lda, int64_t strideA, const uint16_t* b, int64_t ldb, int64_t strideB,
                     void* c, int64_t ldc, int64_t strideC, bool f32Out) {
  int threads = omp_in_parallel() ? 1 : std::min(gemmThreads(batch * m, n, k), omp_get_max_threads());
  bool done = false;
  withThreads(threads, [&] {
    Bound& mm = batchedPrimitiveFor(memory::data_type::bf16, f32Out ? memory::data_type::f32 : memory::data_type::bf16,
                                    ta, tb, batch, m, n, k, lda, strideA, ldb, strideB, ldc, strideC, threads);
    if (!mm) return;
    const void* pointers[] = {a, b, c};
    mm.run(pointers);
    done = true;
  });
  return done;
}

namespace {

// The stored block of a batch of matrices (rows x cols each, leading dimension ld, `stride`
// apart; 0: one matrix) widened to contiguous float32, the layout kept (ld becomes cols).
std::vector<float> widenBlock(bool bf16, const uint16_t* x, int64_t count, int64_t rows, int64_t cols,
                              int64_t ld, int64_t stride) {
  int64_t entries = stride == 0 ? 1 : count;
  std::vector<float> out(size_t(entries * rows * cols));
#pragma omp parallel for if (entries * rows * cols > 65536)
  for (int64_t r = 0; r < entries * rows; ++r) {
    const uint16_t* src = x + (r / rows) * stride + (r % rows) * ld;
    float* dst = out.data() + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      dst[j] = bf16 ? BFloat16::toFloat(src[j]) : Half::toFloat(src[j]);
  }
  return out;
}

} // namespace

void gemm16Batched(bool bf16, bool f32Out, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k,
                   const uint16_t* a, int64_t lda, int64_t strideA, const uint16_t* b, int64_t ldb,
                   int64_t strideB, void* c, int64_t ldc, int64_t strideC) {
  if (bf16 && bf16GemmBatched(ta, tb, batch, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC, f32Out))
    return;
  // The stored blocks: m x k (k x m when transposed) for a, k x n (n x k) for b.
  std::vector<float> wa = widenBlock(bf16, a, batch, ta ? k : m, ta ? m : k, lda, strideA);
  std::vector<float> wb = widenBlock(bf16, b, batch, tb ? n : k, tb ? k : n, ldb, strideB);
  if (f32Out) { // straight into c
    sgemmBatched(ta, tb, batch, m, n, k, wa.data(), ta ? m : k, strideA == 0 ? 0 : m * k, wb.data(),
                 tb ? k : n, strideB == 0 ? 0 : k * n, static_cast<float*>(c), ldc, strideC);
    return;
  }
  std::vector<float> wc(size_t(batch * m * n));
  sgemmBatched(ta, tb, batch, m, n, k, wa.data(), ta ? m : k, strideA == 0 ? 0 : m * k, wb.data(),
               tb ? k : n, strideB == 0 ? 0 : k * n, wc.data(), n, m * n);
  uint16_t* out = static_cast<uint16_t*>(c);
#pragma omp parallel for if (batch * m * n > 65536)
  for (int64_t r = 0; r < batch * m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      float v = wc[size_t(r * n + j)];
      out[(r / m) * strideC + (r % m) * ldc + j] = bf16 ? BFloat16(v).bits : Half(v).bits;
    }
}

float applyPostOps(float v, const PostOp* ops, int nops, int64_t row, int64_t col) {
  for (int i = 0; i < nops; ++i) {
    const PostOp& op = ops[i];
    float t = isBinary(op.kind) ? op.tensor[row * op.rowStride + col] : 0.f;
    switch (op.kind) {
    case PostOpKind::Linear: v = op.alpha * v + op.beta; break;
    case PostOpKind::Relu: v = v <= 0.f ? 0.f : v; break;
    case PostOpKind::GeluErf: v = 0.5f * v * (1.f + std::erf(v * 0.70710678118654752f)); break;
    case PostOpKind::GeluTanh:
      v = 0.5f * v * (1.f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
      break;
    case PostOpKind::Tanh: v = std::tanh(v); break;
    case PostOpKind::Sigmoid: v = 1.f / (1.f + std::exp(-v)); break;
    case PostOpKind::Silu: v = v / (1.f + std::exp(-v)); break;
    case PostOpKind::Exp: v = std::exp(v); break;
    case PostOpKind::Abs: v = std::fabs(v); break;
    case PostOpKind::Sqrt: v = std::sqrt(v); break;
    case PostOpKind::Add: v = v + t; break;
    case PostOpKind::Sub: v = v - t; break;
    case PostOpKind::Mul: v = v * t; break;
    case PostOpKind::Div: v = v / t; break;
    case PostOpKind::Max: v = std::isnan(v) || std::isnan(t) ? NAN : std::max(v, t); break;
    case PostOpKind::Min: v = std::isnan(v) || std::isnan(t) ? NAN : std::min(v, t); break;
    }
  }
  return v;
}

namespace {

// The post-ops on rows [r0, r1) x columns [c0, c1) of c: one op at a time over a row (a
// vectorized loop; KilnMath.h's math, this file is compiled with -fno-trapping-math), the row
// still in cache from the GEMM that wrote it.
void applyPostOpsBlock(float* c, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                       const PostOp* ops, int nops) {
  namespace km = math;
  const int64_t w = c1 - c0;
  for (int64_t r = r0; r < r1; ++r) {
    float* __restrict v = c + r * ldc + c0;
    for (int i = 0; i < nops; ++i) {
      const PostOp& op = ops[i];
      const float* __restrict t = isBinary(op.kind) ? op.tensor + r * op.rowStride + c0 : nullptr;
      const float alpha = op.alpha, beta = op.beta;
      switch (op.kind) {
      case PostOpKind::Linear:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = alpha * v[j] + beta;
        break;
      case PostOpKind::Relu:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = v[j] <= 0.f ? 0.f : v[j];
        break;
      case PostOpKind::GeluErf:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j)
          v[j] = 0.5f * v[j] * (1.f + km::erf(v[j] * 0.70710678118654752f));
        break;
      case PostOpKind::GeluTanh:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j)
          v[j] = 0.5f * v[j] *
                 (1.f + km::tanh(0.7978845608028654f * (v[j] + 0.044715f * v[j] * v[j] * v[j])));
        break;
      case PostOpKind::Tanh:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = km::tanh(v[j]);
        break;
      case PostOpKind::Sigmoid:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = 1.f / (1.f + km::exp(-v[j]));
        break;
      case PostOpKind::Silu:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = v[j] / (1.f + km::exp(-v[j]));
        break;
      case PostOpKind::Exp:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = km::exp(v[j]);
        break;
      case PostOpKind::Abs:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = std::fabs(v[j]);
        break;
      case PostOpKind::Sqrt:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = std::sqrt(v[j]);
        break;
      case PostOpKind::Add:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = v[j] + t[j];
        break;
      case PostOpKind::Sub:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = v[j] - t[j];
        break;
      case PostOpKind::Mul:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = v[j] * t[j];
        break;
      case PostOpKind::Div:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) v[j] = v[j] / t[j];
        break;
      case PostOpKind::Max:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j)
          v[j] = (v[j] != v[j] || t[j] != t[j]) ? NAN : (v[j] < t[j] ? t[j] : v[j]);
        break;
      case PostOpKind::Min:
#pragma omp simd
        for (int64_t j = 0; j < w; ++j)
          v[j] = (v[j] != v[j] || t[j] != t[j]) ? NAN : (t[j] < v[j] ? t[j] : v[j]);
        break;
      }
    }
  }
}

// c = post(op(a) @ op(b)) as `threads` single-threaded dnnl_sgemm calls in one parallel region,
// each on a block of rows (or of columns, when there are too few rows to share), each followed
// by the post-ops on its block. One parallel region instead of two (GEMM, then a pass over C):
// on a loaded machine every region's barrier waits for a descheduled thread.
void splitGemmPostOps(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                      const PostOp* ops, int nops, int threads) {
  constexpr int64_t kMinRows = 32, kColumnAlign = 16;
  const bool byRows = threads == 1 || m >= threads * kMinRows || m >= n;
  int status = dnnl_success;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int64_t parts = omp_get_num_threads(), part = omp_get_thread_num();
    int64_t r0 = 0, r1 = m, c0 = 0, c1 = n;
    if (byRows) {
      r0 = m * part / parts;
      r1 = m * (part + 1) / parts;
    } else {
      const int64_t chunk = (n + parts * kColumnAlign - 1) / (parts * kColumnAlign) * kColumnAlign;
      c0 = std::min(n, part * chunk);
      c1 = std::min(n, c0 + chunk);
    }
    if (r1 > r0 && c1 > c0) {
      const float* ap = ta ? a + r0 : a + r0 * lda;
      const float* bp = tb ? b + c0 * ldb : b + c0;
      dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', r1 - r0, c1 - c0, k, 1.f, ap,
                                    lda, bp, ldb, 0.f, c + r0 * ldc + c0, ldc);
      if (st != dnnl_success) {
#pragma omp atomic write
        status = int(st);
      }
      applyPostOpsBlock(c, ldc, r0, r1, c0, c1, ops, nops);
    }
  }
  KILN_CHECK(status == dnnl_success, "sgemm with post-ops: oneDNN's dnnl_sgemm failed with status ",
             status, " (m=", m, ", n=", n, ", k=", k, ")");
}

} // namespace

void sgemmPostOps(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float* c, int64_t ldc, const PostOp* ops, int nops) {
  int threads = std::min(gemmThreads(m, n, k), omp_in_parallel() ? 1 : omp_get_max_threads());
  bool done = false;
  withThreads(threads, [&] {
    Bound& mm = primitiveFor(ta, tb, m, n, k, lda, ldb, ldc, ops, nops, threads);
    if (!mm) return;
    thread_local std::vector<const void*> pointers;
    pointers.assign({a, b, c});
    for (int i = 0; i < nops; ++i)
      if (isBinary(ops[i].kind)) pointers.push_back(ops[i].tensor);
    mm.run(pointers.data());
    done = true;
  });
  if (done) return;
  if (nops == 0 || m == 0 || n == 0) {
    sgemmLibrary(ta, tb, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc);
    return;
  }
  splitGemmPostOps(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, ops, nops, threads);
}

} // namespace kiln::cpu
