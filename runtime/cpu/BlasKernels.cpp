// Matrix products: mm, bmm, mv, dot, addmm, addmv, baddbmm, matmul (every rank case of
// torch.matmul) and outer. float32 GEMMs run through oneDNN, float64 ones and the vector shapes
// through OpenBLAS (cpu/Gemm.h): a column-major operand (a .t() view) is passed with the
// transpose flag, only operands BLAS cannot address are copied. Other
// dtypes run a loop that accumulates in a wider type: 64-bit integer arithmetic for integers
// (wrapping exactly as PyTorch's narrower accumulation does), float for float16/bfloat16.
#include <cstdint>
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/CppTypeName.h"
#include "runtime/cpu/DnnlMatmul.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/TensorIterator.h"

namespace kiln::kernels {

namespace {

void checkSameDevice(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.device().type == b.device().type,
             "Expected all tensors to be on the same device, but found at least two devices, ",
             a.device().str(), " and ", b.device().str(), "!");
}

// Tensor.expand's checks for broadcasting `self` to `target` (addmm's self to [m, n]).
void checkExpandable(const Tensor& self, IntArrayRef target) {
  KILN_CHECK(size_t(self.dim()) <= target.size(), "expand(kiln.", scalarTypeShortName(self.dtype()),
             "Tensor{", self.shapeString(), "}, size=", shapeString(target),
             "): the number of sizes provided (", target.size(),
             ") must be greater or equal to the number of dimensions in the tensor (", self.dim(),
             ")");
  for (int64_t i = int64_t(target.size()) - 1, j = self.dim() - 1; j >= 0; --i, --j) {
    int64_t s = self.sizes()[size_t(j)], t = target[size_t(i)];
    KILN_CHECK(s == t || s == 1, "The expanded size of the tensor (", t,
               ") must match the existing size (", s, ") at non-singleton dimension ", i,
               ".  Target sizes: ", shapeString(target), ".  Tensor sizes: ", self.shapeString());
  }
}

// t viewed with other geometry over the same memory (starting where t starts).
Tensor viewOf(const Tensor& t, IntArrayRef sizes, IntArrayRef strides) {
  return t.asStrided(sizes, strides, t.storageOffset());
}

// How BLAS addresses a rows x cols matrix with these element strides: row-major (no transpose)
// or column-major (transpose flag), with its leading dimension; ok=false when neither fits.
struct BlasLayout {
  bool ok = false;
  bool transposed = false;
  int64_t ld = 0;
};

BlasLayout blasLayout(int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride) {
  // A dim of size <= 1 is never stepped along, so its stride does not matter.
  if ((colStride == 1 || cols <= 1) && (rows <= 1 || rowStride >= std::max<int64_t>(1, cols)))
    return {true, false, rows <= 1 ? std::max<int64_t>(1, cols) : rowStride};
  if ((rowStride == 1 || rows <= 1) && (cols <= 1 || colStride >= std::max<int64_t>(1, rows)))
    return {true, true, cols <= 1 ? std::max<int64_t>(1, rows) : colStride};
  return {};
}

// One operand of a batched product: element (batch b, i, j) sits at
// data + offset(b) + i * rowStride + j * colStride (elements).
struct Operand {
  char* data;
  int64_t rowStride, colStride;
  DimVector batchStrides; // one per batch dim of the product; 0 where this operand is broadcast
};

Operand operandOf(const Tensor& t, IntArrayRef batch) {
  Operand op{t.rawData(), t.stride(-2), t.stride(-1), DimVector(batch.size())};
  int64_t skipped = int64_t(batch.size()) - (t.dim() - 2);
  for (size_t d = 0; d < batch.size(); ++d) {
    int64_t td = int64_t(d) - skipped;
    op.batchStrides[d] = td >= 0 && t.sizes()[size_t(td)] != 1 ? t.strides()[size_t(td)] : 0;
  }
  return op;
}

int64_t batchOffset(const DimVector& strides, IntArrayRef batch, int64_t linear) {
  int64_t offset = 0;
  for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
    offset += (linear % batch[size_t(d)]) * strides[size_t(d)];
    linear /= batch[size_t(d)];
  }
  return offset;
}

// The one stride that steps an operand through its (flattened) batch, if there is one: entry
// bi at bi * stride for every bi (0 when the operand is broadcast over the whole batch).
bool collapsedStride(const DimVector& strides, IntArrayRef batch, int64_t& stride) {
  bool first = true;
  int64_t expected = 0;
  for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
    if (batch[size_t(d)] == 1) continue;
    if (first) {
      stride = strides[size_t(d)];
      first = false;
    } else if (strides[size_t(d)] != expected) {
      return false;
    }
    expected = strides[size_t(d)] * batch[size_t(d)];
  }
  if (first) stride = 0;
  return true;
}

// The shapes of one product: batch dims, then C[m, n] = A[m, k] @ B[k, n].
struct GemmShape {
  DimVector batch;
  int64_t m, n, k;
};

template <typename T>
void blasGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
              const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    cpu::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cpu::dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// y[m] = alpha * A[m, k] x[k] + beta * y, A as a BLAS layout, x with stride incx, y contiguous.
template <typename T>
void blasGemv(const BlasLayout& la, int64_t m, int64_t k, T alpha, const T* a, const T* x,
              int64_t incx, T beta, T* y) {
  // CBLAS describes the stored matrix: m x k as is, or k x m when A is column-major.
  auto trans = la.transposed ? CblasTrans : CblasNoTrans;
  int rows = int(la.transposed ? k : m), cols = int(la.transposed ? m : k);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, trans, rows, cols, alpha, a, int(la.ld), x, int(incx), beta, y, 1);
  else
    cblas_dgemv(CblasRowMajor, trans, rows, cols, alpha, a, int(la.ld), x, int(incx), beta, y, 1);
}

template <typename T> T blasDot(int64_t k, const T* x, int64_t incx, const T* y, int64_t incy) {
  if constexpr (std::is_same_v<T, float>)
    return cblas_sdot(int(k), x, int(incx), y, int(incy));
  else
    return cblas_ddot(int(k), x, int(incx), y, int(incy));
}

// float32/float64 through BLAS; every operand already has a BLAS layout (see batchedGemm).
// `cBytes` is c's extent, zeroed before the per-matrix BLAS calls when beta is 0 (see below).
template <typename T>
void runBlas(const GemmShape& s, const Operand& A, const Operand& B, const Operand& C, T alpha,
             T beta, size_t cBytes) {
  BlasLayout la = blasLayout(s.m, s.k, A.rowStride, A.colStride);
  BlasLayout lb = blasLayout(s.k, s.n, B.rowStride, B.colStride);
  int64_t count = computeNumel(s.batch);
  if constexpr (std::is_same_v<T, float>) {
    // A batch of float32 GEMMs as one batched product (one parallel region, DnnlMatmul.h) when
    // every operand steps through its batch by one stride.
    int64_t sa, sb, sc;
    if (count > 1 && s.n > 1 && alpha == 1.f && beta == 0.f &&
        collapsedStride(A.batchStrides, s.batch, sa) && collapsedStride(B.batchStrides, s.batch, sb) &&
        collapsedStride(C.batchStrides, s.batch, sc)) {
      cpu::sgemmBatched(la.transposed, lb.transposed, count, s.m, s.n, s.k,
                        reinterpret_cast<const float*>(A.data), la.ld, sa,
                        reinterpret_cast<const float*>(B.data), lb.ld, sb,
                        reinterpret_cast<float*>(C.data), C.rowStride, sc);
      return; // oneDNN's batched product writes c without reading it: no zeroing needed
    }
  }
  // BLAS may scale c by beta = 0 (0 * nan is nan in OpenBLAS's gemv/scal): give it zeros, not
  // uninitialized memory.
  if (beta == T(0)) std::memset(C.data, 0, cBytes);
  for (int64_t bi = 0; bi < count; ++bi) {
    const T* a = reinterpret_cast<const T*>(A.data) + batchOffset(A.batchStrides, s.batch, bi);
    const T* b = reinterpret_cast<const T*>(B.data) + batchOffset(B.batchStrides, s.batch, bi);
    T* c = reinterpret_cast<T*>(C.data) + batchOffset(C.batchStrides, s.batch, bi);
    // Vector shapes get the vector routines: they are much faster than a degenerate GEMM.
    int64_t incx = s.k <= 1 ? 1 : B.rowStride;
    if (s.m == 1 && s.n == 1) {
      T dot = blasDot<T>(s.k, a, s.k <= 1 ? 1 : A.colStride, b, incx);
      *c = alpha * dot + (beta == T(0) ? T(0) : beta * *c);
    } else if (s.n == 1) {
      blasGemv<T>(la, s.m, s.k, alpha, a, b, incx, beta, c);
    } else {
      blasGemm<T>(la.transposed, lb.transposed, s.m, s.n, s.k, alpha, a, la.ld, b, lb.ld, beta, c,
                  C.rowStride);
    }
  }
}

// Any numeric dtype: each output row accumulates in Acc (a per-thread row buffer), in parallel.
template <typename T>
void runLoop(const GemmShape& s, const Operand& A, const Operand& B, const Operand& C,
             const Scalar& alphaValue, const Scalar& betaValue) {
  // Unsigned integer arithmetic wraps, and the low bits of a sum do not depend on the high ones:
  // 32 bits suffice for the types up to int32 (and vectorize better than 64).
  using Acc =
      std::conditional_t<std::is_integral_v<T>,
                         std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>, opmath_t<T>>;
  auto widen = [](T v) -> Acc {
    if constexpr (std::is_integral_v<T>)
      return Acc(int64_t(v));
    else
      return Acc(v);
  };
  auto narrow = [](Acc v) -> T {
    if constexpr (std::is_integral_v<T>)
      return T(int64_t(v));
    else
      return T(v);
  };
  Acc alpha = std::is_integral_v<T> ? Acc(alphaValue.toInt()) : Acc(alphaValue.toDouble());
  Acc beta = std::is_integral_v<T> ? Acc(betaValue.toInt()) : Acc(betaValue.toDouble());
  bool useC = betaValue.toDouble() != 0.0 && beta != Acc(0);
  int64_t rows = computeNumel(s.batch) * s.m, n = s.n, k = s.k;
  int threads = omp_get_max_threads();
  std::vector<Acc> buffer(size_t(threads) * size_t(n));
#pragma omp parallel for num_threads(threads) if (rows * n * k > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    Acc* acc = buffer.data() + size_t(omp_get_thread_num()) * size_t(n);
    int64_t bi = r / s.m, i = r % s.m;
    const char* a =
        A.data + (batchOffset(A.batchStrides, s.batch, bi) + i * A.rowStride) * int64_t(sizeof(T));
    const char* b = B.data + batchOffset(B.batchStrides, s.batch, bi) * int64_t(sizeof(T));
    T* c =
        reinterpret_cast<T*>(C.data) + batchOffset(C.batchStrides, s.batch, bi) + i * C.rowStride;
    std::fill(acc, acc + n, Acc(0));
    for (int64_t p = 0; p < k; ++p) {
      Acc av = widen(*reinterpret_cast<const T*>(a + p * A.colStride * int64_t(sizeof(T))));
      const T* brow = reinterpret_cast<const T*>(b) + p * B.rowStride;
      if (B.colStride == 1) { // the common row-major case, as a loop the compiler vectorizes
        for (int64_t j = 0; j < n; ++j)
          acc[j] += av * widen(brow[j]);
      } else {
        for (int64_t j = 0; j < n; ++j)
          acc[j] += av * widen(brow[j * B.colStride]);
      }
    }
    for (int64_t j = 0; j < n; ++j)
      c[j] = narrow(alpha * acc[j] + (useC ? beta * widen(c[j]) : Acc(0)));
  }
}

// A bfloat16 product on oneDNN's bfloat16 kernels (AVX-512 BF16 / AMX: several times float32's
// speed), where every operand steps through the batch by one stride, into a bfloat16 c (rounded
// once) or a float32 c (unrounded); false (nothing written) where it cannot run, and the caller
// widens to float32.
bool nativeBf16Gemm(Tensor a, Tensor b, const Tensor& c, IntArrayRef batch) {
  int64_t m = a.size(-2), n = b.size(-1), k = a.size(-1);
  if (k == 0 || std::max({m, n, k}) >= INT_MAX / 2) return false;
  if (!blasLayout(m, k, a.stride(-2), a.stride(-1)).ok) a = ops::contiguous(a);
  if (!blasLayout(k, n, b.stride(-2), b.stride(-1)).ok) b = ops::contiguous(b);
  Operand A = operandOf(a, batch), B = operandOf(b, batch), C = operandOf(c, batch);
  int64_t sa, sb, sc;
  if (!collapsedStride(A.batchStrides, batch, sa) || !collapsedStride(B.batchStrides, batch, sb) ||
      !collapsedStride(C.batchStrides, batch, sc))
    return false;
  BlasLayout la = blasLayout(m, k, A.rowStride, A.colStride), lb = blasLayout(k, n, B.rowStride, B.colStride);
  return cpu::bf16GemmBatched(la.transposed, lb.transposed, computeNumel(batch), m, n, k,
                              reinterpret_cast<const uint16_t*>(A.data), la.ld, sa,
                              reinterpret_cast<const uint16_t*>(B.data), lb.ld, sb,
                              C.data, C.rowStride, sc, c.dtype() == ScalarType::Float32);
}

// c[batch..., m, n] (contiguous, already holding beta's addend when beta != 0) =
// alpha * a @ b + beta * c for every batch index; a is [..., m, k], b [..., k, n] (or views of
// vectors), their batch dims broadcasting against `batch`. beta == 0 never reads c.
void batchedGemm(const char* op, Tensor a, Tensor b, const Tensor& c, IntArrayRef batch,
                 const Scalar& alpha, const Scalar& beta) {
  if (c.isMeta() || c.numel() == 0) return;
  ScalarType dt = c.dtype();
  if (dt == ScalarType::BFloat16 && alpha.toDouble() == 1.0 && beta.toDouble() == 0.0 &&
      nativeBf16Gemm(a, b, c, batch))
    return;
  if (dt == ScalarType::BFloat16) {
    // beta * c + alpha * (a @ b) in float32 from the unrounded product, rounded once (a
    // bfloat16 linear layer's bias).
    Tensor wide = Tensor::empty(c.sizes(), ScalarType::Float32);
    if (nativeBf16Gemm(a, b, wide, batch)) {
      if (alpha.toDouble() != 1.0) wide = ops::mul(wide, alpha);
      if (beta.toDouble() != 0.0) {
        Tensor bias = ops::_to_copy(c, ScalarType::Float32, std::nullopt);
        wide = ops::add(beta.toDouble() == 1.0 ? bias : ops::mul(bias, beta), wide);
      }
      ops::copy_(c, wide, false);
      return;
    }
  }
  if (dt == ScalarType::Float16 || dt == ScalarType::BFloat16) {
    // Widened to float32 for BLAS: accumulating in float and rounding once is what PyTorch's
    // CPU kernels do for the 16-bit floats too.
    auto widen = [](const Tensor& t) {
      return ops::_to_copy(t, ScalarType::Float32, std::nullopt);
    };
    Tensor wide = beta.toDouble() != 0.0 ? widen(c) : Tensor::empty(c.sizes(), ScalarType::Float32);
    batchedGemm(op, widen(a), widen(b), wide, batch, alpha, beta);
    ops::copy_(c, wide, false);
    return;
  }
  GemmShape s{DimVector(batch), a.size(-2), b.size(-1), a.size(-1)};
  bool blas = (dt == ScalarType::Float32 || dt == ScalarType::Float64) && s.k > 0 &&
              std::max({s.m, s.n, s.k}) < INT_MAX / 2;
  if (blas) {
    if (!blasLayout(s.m, s.k, a.stride(-2), a.stride(-1)).ok) a = ops::contiguous(a);
    if (!blasLayout(s.k, s.n, b.stride(-2), b.stride(-1)).ok) b = ops::contiguous(b);
  }
  Operand A = operandOf(a, batch), B = operandOf(b, batch), C = operandOf(c, batch);
  // A batch that shares one B (matmul of [..., m, k] by [k, n]) is one tall GEMM when A's batch
  // dims step through memory like extra rows.
  bool sharedB =
      std::all_of(B.batchStrides.begin(), B.batchStrides.end(), [](int64_t v) { return v == 0; });
  if (sharedB && !batch.empty()) {
    int64_t expected = A.rowStride * s.m;
    bool foldable = true;
    for (int64_t d = int64_t(batch.size()) - 1; d >= 0 && foldable; --d) {
      if (batch[size_t(d)] == 1) continue;
      foldable = A.batchStrides[size_t(d)] == expected;
      expected *= batch[size_t(d)];
    }
    int64_t rows = computeNumel(batch) * s.m;
    if (foldable && (!blas || blasLayout(rows, s.k, A.rowStride, A.colStride).ok)) {
      s = GemmShape{DimVector(), rows, s.n, s.k};
      A.batchStrides.clear();
      B.batchStrides.clear();
      C.batchStrides.clear();
    }
  }
  KILN_DISPATCH_NUMERIC(dt, op, [&]<typename scalar_t>() {
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      if (blas) {
        runBlas<scalar_t>(s, A, B, C, alpha.to<scalar_t>(), beta.to<scalar_t>(),
                          size_t(c.numel()) * sizeof(scalar_t));
        return;
      }
    }
    runLoop<scalar_t>(s, A, B, C, alpha, beta);
  });
}

// mm's and addmm's checks (PyTorch's order: ranks, shapes, then dtypes).
void checkMatrices(const char* self, const Tensor& a, const Tensor& b, bool addmmWording) {
  if (addmmWording) {
    KILN_CHECK(a.dim() == 2, "mat1 must be a matrix, got ", a.dim(), "-D tensor");
    KILN_CHECK(b.dim() == 2, "mat2 must be a matrix, got ", b.dim(), "-D tensor");
  } else {
    KILN_CHECK(a.dim() == 2, self, " must be a matrix");
    KILN_CHECK(b.dim() == 2, "mat2 must be a matrix");
  }
  checkSameDevice(a, b);
  KILN_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
             a.size(1), " and ", b.size(0), "x", b.size(1), ")");
}

void checkBatches(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  KILN_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  checkSameDevice(a, b);
  KILN_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2),
             "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ",
             a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
  KILN_CHECK(a.dtype() == b.dtype(), "expected scalar type ", scalarTypeShortName(a.dtype()),
             " but found ", scalarTypeShortName(b.dtype()));
}

// The mv family's checks; `self` is addmv's input (mv passes none).
void checkMatrixVector(const Tensor* self, const Tensor& mat, const Tensor& vec) {
  int64_t selfDim = self ? self->dim() : 1;
  KILN_CHECK(mat.dim() == 2 && vec.dim() == 1 && selfDim <= 1,
             "vector + matrix @ vector expected, got ", selfDim, ", ", mat.dim(), ", ", vec.dim());
  checkSameDevice(mat, vec);
  ScalarType selfType = self ? self->dtype() : vec.dtype();
  KILN_CHECK(mat.dtype() == vec.dtype() && selfType == vec.dtype(),
             "addmv input tensors must have the same dtype, but got ",
             scalarTypeShortName(selfType), ", ", scalarTypeShortName(mat.dtype()), ", and ",
             scalarTypeShortName(vec.dtype()));
  // addmv's input broadcasts only from one element; mv's "input" is its own result.
  int64_t inputSize = self && self->dim() == 1 && self->size(0) != 1 ? self->size(0) : mat.size(0);
  KILN_CHECK(mat.size(1) == vec.size(0) && inputSize == mat.size(0), "size mismatch, got input (",
             inputSize, "), mat (", mat.size(0), "x", mat.size(1), "), vec (", vec.size(0), ")");
}

// The first term of addmm-like ops: self broadcast into a fresh result, unless beta is 0.
Tensor resultWithInput(const Tensor& self, IntArrayRef sizes, ScalarType dtype,
                       const Scalar& beta) {
  Tensor out = Tensor::empty(sizes, dtype, self.device());
  if (beta.toDouble() != 0.0 && !out.isMeta()) ops::copy_(out, self, false);
  return out;
}

// A 1-D tensor as a [1, k] row or a [k, 1] column, over the same memory.
Tensor rowOf(const Tensor& v) { return viewOf(v, {1, v.size(0)}, {0, v.stride(0)}); }
Tensor columnOf(const Tensor& v) { return viewOf(v, {v.size(0), 1}, {v.stride(0), 0}); }

} // namespace

Tensor mm(const Tensor& self, const Tensor& mat2) {
  checkMatrices("self", self, mat2, false);
  KILN_CHECK(self.dtype() == mat2.dtype(),
             "expected m1 and m2 to have the same dtype, but got: ", cppTypeName(self.dtype()),
             " != ", cppTypeName(mat2.dtype()));
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("addmm_impl_cpu_", ScalarType::Bool);
  Tensor out = Tensor::empty({self.size(0), mat2.size(1)}, self.dtype(), self.device());
  batchedGemm("mm", self, mat2, out, {}, Scalar(int64_t(1)), Scalar(int64_t(0)));
  return out;
}

Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
             const Scalar& alpha) {
  checkMatrices("mat1", mat1, mat2, true);
  checkSameDevice(self, mat1);
  KILN_CHECK(self.dtype() == mat2.dtype(), "self and mat2 must have the same dtype, but got ",
             scalarTypeShortName(self.dtype()), " and ", scalarTypeShortName(mat2.dtype()));
  KILN_CHECK(mat1.dtype() == mat2.dtype(), "mat1 and mat2 must have the same dtype, but got ",
             scalarTypeShortName(mat1.dtype()), " and ", scalarTypeShortName(mat2.dtype()));
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("addmm_impl_cpu_", ScalarType::Bool);
  int64_t sizes[] = {mat1.size(0), mat2.size(1)};
  checkExpandable(self, IntArrayRef(sizes, 2));
  Tensor out = resultWithInput(self, IntArrayRef(sizes, 2), self.dtype(), beta);
  batchedGemm("addmm", mat1, mat2, out, {}, alpha, beta);
  return out;
}

Tensor bmm(const Tensor& self, const Tensor& mat2) {
  checkBatches(self, mat2);
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("bmm", ScalarType::Bool);
  int64_t batch = self.size(0);
  Tensor out = Tensor::empty({batch, self.size(1), mat2.size(2)}, self.dtype(), self.device());
  batchedGemm("bmm", self, mat2, out, IntArrayRef(&batch, 1), Scalar(int64_t(1)),
              Scalar(int64_t(0)));
  return out;
}

Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  KILN_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  KILN_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  checkSameDevice(self, batch1);
  KILN_CHECK(self.dtype() == batch1.dtype(), "Input dtypes must be the same, got: input ",
             cppTypeName(self.dtype()), ", batch1: ", cppTypeName(batch1.dtype()),
             ", batch2: ", cppTypeName(batch2.dtype()));
  checkBatches(batch1, batch2);
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("baddbmm", ScalarType::Bool);
  int64_t batch = batch1.size(0);
  int64_t sizes[] = {batch, batch1.size(1), batch2.size(2)};
  checkExpandable(self, IntArrayRef(sizes, 3));
  Tensor out = resultWithInput(self, IntArrayRef(sizes, 3), self.dtype(), beta);
  batchedGemm("baddbmm", batch1, batch2, out, IntArrayRef(&batch, 1), alpha, beta);
  return out;
}

Tensor mv(const Tensor& self, const Tensor& vec) {
  checkMatrixVector(nullptr, self, vec);
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("addmv_impl_cpu", ScalarType::Bool);
  Tensor out = Tensor::empty({self.size(0)}, self.dtype(), self.device());
  batchedGemm("mv", self, columnOf(vec), columnOf(out), {}, Scalar(int64_t(1)), Scalar(int64_t(0)));
  return out;
}

Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta,
             const Scalar& alpha) {
  checkMatrixVector(&self, mat, vec);
  checkSameDevice(self, mat);
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("addmv_impl_cpu", ScalarType::Bool);
  int64_t m = mat.size(0);
  Tensor out = resultWithInput(self, IntArrayRef(&m, 1), self.dtype(), beta);
  batchedGemm("addmv", mat, columnOf(vec), columnOf(out), {}, alpha, beta);
  return out;
}

Tensor dot(const Tensor& self, const Tensor& tensor) {
  KILN_CHECK(self.dim() == 1 && tensor.dim() == 1, "1D tensors expected, but got ", self.dim(),
             "D and ", tensor.dim(), "D tensors");
  checkSameDevice(self, tensor);
  KILN_CHECK(self.dtype() == tensor.dtype(),
             "dot : expected both vectors to have same dtype, but found ",
             scalarTypeShortName(self.dtype()), " and ", scalarTypeShortName(tensor.dtype()));
  KILN_CHECK(self.numel() == tensor.numel(), "inconsistent tensor size, expected tensor [",
             self.numel(), "] and src [", tensor.numel(),
             "] to have the same number of elements, but got ", self.numel(), " and ",
             tensor.numel(), " elements respectively");
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("dot", ScalarType::Bool);
  Tensor out = Tensor::empty({}, self.dtype(), self.device());
  batchedGemm("dot", rowOf(self), columnOf(tensor), viewOf(out, {1, 1}, {1, 1}), {},
              Scalar(int64_t(1)), Scalar(int64_t(0)));
  return out;
}

Tensor matmul(const Tensor& self, const Tensor& other) {
  int64_t d1 = self.dim(), d2 = other.dim();
  KILN_CHECK(d1 > 0 && d2 > 0, "both arguments to matmul need to be at least 1D, but they are ", d1,
             "D and ", d2, "D");
  if (d1 == 1 && d2 == 1) return dot(self, other);
  if (d1 == 2 && d2 == 1) return mv(self, other);
  if (d1 == 2 && d2 == 2) return mm(self, other);
  if (d1 == 1 && d2 == 2) {
    Tensor r = mm(rowOf(self), other);
    return viewOf(r, {r.size(1)}, {1});
  }
  if (d1 >= 3 && d2 <= 2) {
    // PyTorch folds self's batch dims into its rows: one mm (or mv) on [batch * n, k].
    int64_t k = self.size(-1);
    DimVector shape(IntArrayRef(self.sizes().begin(), size_t(d1 - 1)));
    Tensor dense = self.isContiguous() ? self : ops::contiguous(self);
    Tensor folded = viewOf(dense, {computeNumel(shape), k}, {k, 1});
    Tensor r = d2 == 1 ? mv(folded, other) : mm(folded, other);
    if (d2 == 2) shape.push_back(other.size(1));
    return viewOf(r, shape, contiguousStrides(shape));
  }
  // The batched case: vectors become [1, k] / [k, 1] matrices, batch dims broadcast, then bmm.
  int64_t n = d1 > 1 ? self.size(-2) : 1, k1 = self.size(-1);
  int64_t k2 = d2 > 1 ? other.size(-2) : other.size(0), p = d2 > 1 ? other.size(-1) : 1;
  IntArrayRef batch1(self.sizes().begin(), size_t(std::max<int64_t>(d1 - 2, 0)));
  IntArrayRef batch2(other.sizes().begin(), size_t(std::max<int64_t>(d2 - 2, 0)));
  DimVector batch = broadcastShapes("matmul", batch1, batch2);
  checkSameDevice(self, other);
  KILN_CHECK(self.dtype() == other.dtype(), "expected scalar type ",
             scalarTypeShortName(self.dtype()), " but found ", scalarTypeShortName(other.dtype()));
  int64_t count = computeNumel(batch);
  KILN_CHECK(k1 == k2, "Expected size for first two dimensions of batch2 tensor to be: [", count,
             ", ", k1, "] but got: [", count, ", ", k2, "].");
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("bmm", ScalarType::Bool);
  DimVector outSizes = batch;
  outSizes.push_back(n);
  outSizes.push_back(p);
  Tensor out = Tensor::empty(outSizes, self.dtype(), self.device());
  batchedGemm("matmul", d1 == 1 ? rowOf(self) : self, d2 == 1 ? columnOf(other) : other, out, batch,
              Scalar(int64_t(1)), Scalar(int64_t(0)));
  DimVector shape = batch;
  if (d1 > 1) shape.push_back(n);
  if (d2 > 1) shape.push_back(p);
  return viewOf(out, shape, contiguousStrides(shape));
}

Tensor outer(const Tensor& self, const Tensor& vec2) {
  KILN_CHECK(self.dim() == 1, "outer: Expected 1-D argument self, but got ", self.dim(), "-D");
  KILN_CHECK(vec2.dim() == 1, "outer: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  return ops::mul(columnOf(self), rowOf(vec2));
}

} // namespace kiln::kernels

namespace kiln::cpu {

void gemmInto(const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate) {
  kernels::batchedGemm("mm", a, b, c, {}, Scalar(int64_t(1)), Scalar(int64_t(accumulate ? 1 : 0)));
}

int gemmThreads(int64_t m, int64_t n, int64_t k) {
  // Below this many multiply-adds a second thread costs more (waking it, splitting the
  // blocks) than it saves: oneDNN at 1 vs 2 threads, 64^3 8.3 vs 8.8 us, 80^3 10.8 vs 9.2 us,
  // 96^3 17.4 vs 12.5 us (2 cores, bench/gemm_candidates.py's shapes).
  constexpr double kSingleThreadMacs = 64.0 * 64 * 80;
  // With a short inner dimension a product is mostly the writing of C, and splitting it costs
  // more than that up to a larger size: an MLP's input gradient from 10 logits, 128 x 512 x 10,
  // 10.9 us on one thread against 15.7 on two (dnnl_sgemm; the matmul primitive 87.9),
  // 256 x 512 x 10 19.5 vs 30.3, 128 x 512 x 16 12.5 vs 16.6; from about 2M multiply-adds two
  // threads win again (512 x 512 x 10 40 vs 21 us, 128 x 512 x 32 25 vs 17). Best of 15 rounds
  // each, 2 cores.
  constexpr int64_t kShortK = 16;
  constexpr double kSingleThreadMacsShortK = 2.0 * 1024 * 1024;
  const double macs = double(m) * double(n) * double(k);
  if (macs < kSingleThreadMacs || (k <= kShortK && macs < kSingleThreadMacsShortK)) return 1;
  return omp_get_max_threads();
}

bool preferMatmulPrimitive(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  // dnnl_sgemm threads a product with a transposed B (x @ W.T) poorly when N or M is small: at 2
  // threads, against oneDNN's matmul primitive (brgemm) on the same operands, 2048 x 2048 x 512
  // 1.21x its time, 2048 x 4096 x 512 1.23x, 2048 x 512 x 256 1.08x, 128 x 2048 x 512 1.26x,
  // 32 x 3072 x 768 1.66x; with N and M both above 512 dnnl_sgemm is the faster one (2048 x 512
  // x 1024 0.94x, 2048 x 4096 x 2048 0.91x), and for B not transposed nearly everywhere (0.83 to
  // 1.06x). On one thread the two are within 4% (busiest thread's CPU time, bench numbers in
  // the commit that chose this).
  if (ta || !tb || m <= 0 || n <= 0 || k <= 0 || omp_in_parallel()) return false;
  return gemmThreads(m, n, k) > 1 && (n <= 512 || m <= 512);
}

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (alpha == 1.f && beta == 0.f && preferMatmulPrimitive(ta, tb, m, n, k)) {
    sgemmPostOps(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, nullptr, 0);
    return;
  }
  sgemmLibrary(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemmLibrary(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t status = dnnl_success;
  withThreads(gemmThreads(m, n, k), [&] {
    // dnnl_sgemm is row-major (unlike Fortran BLAS), as CBLAS with CblasRowMajor.
    status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c,
                        ldc);
  });
  KILN_CHECK(status == dnnl_success, "sgemm: oneDNN's dnnl_sgemm failed with status ",
             int(status), " (m=", m, ", n=", n, ", k=", k, ", lda=", lda, ", ldb=", ldb,
             ", ldc=", ldc, ")");
}

void dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
           int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  withThreads(gemmThreads(m, n, k), [&] {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
  });
}

} // namespace kiln::cpu
