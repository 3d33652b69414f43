// Dense factorizations and solves (torch.linalg's): Cholesky (potrf), inverse (getrf + getri),
// det / slogdet (getrf), solve (getrf + getrs), QR (geqrf + orgqr), symmetric eigendecomposition
// (syevd), SVD (gesdd): LAPACK of the linked OpenBLAS, one call per matrix of the batch, on a
// column-major copy; the triangular solve is a substitution loop (torch's trsm does not check the
// diagonal either: a zero gives inf). float32/float64 only, as torch's CPU kernels. On meta
// tensors each kernel is its op's meta function: it checks the arguments and returns empty
// results of the right shapes. Results are contiguous (row-major).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/CppTypeName.h"

extern "C" {
// Trailing size_t arguments: the hidden lengths of Fortran character arguments.
void spotrf_(const char*, const int*, float*, const int*, int*, size_t);
void dpotrf_(const char*, const int*, double*, const int*, int*, size_t);
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void sgetri_(const int*, float*, const int*, const int*, float*, const int*, int*);
void dgetri_(const int*, double*, const int*, const int*, double*, const int*, int*);
void sgetrs_(const char*, const int*, const int*, const float*, const int*, const int*, float*, const int*, int*,
             size_t);
void dgetrs_(const char*, const int*, const int*, const double*, const int*, const int*, double*, const int*, int*,
             size_t);
void sgeqrf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
void dgeqrf_(const int*, const int*, double*, const int*, double*, double*, const int*, int*);
void sorgqr_(const int*, const int*, const int*, float*, const int*, const float*, float*, const int*, int*);
void dorgqr_(const int*, const int*, const int*, double*, const int*, const double*, double*, const int*, int*);
void ssyevd_(const char*, const char*, const int*, float*, const int*, float*, float*, const int*, int*, const int*,
             int*, size_t, size_t);
void dsyevd_(const char*, const char*, const int*, double*, const int*, double*, double*, const int*, int*,
             const int*, int*, size_t, size_t);
void sgesdd_(const char*, const int*, const int*, float*, const int*, float*, float*, const int*, float*, const int*,
             float*, const int*, int*, int*, size_t);
void dgesdd_(const char*, const int*, const int*, double*, const int*, double*, double*, const int*, double*,
             const int*, double*, const int*, int*, int*, size_t);
}

namespace kiln::kernels {

namespace {

// The LAPACK routine of each precision.
template <typename T> struct Lapack;
template <> struct Lapack<float> {
  static void potrf(char u, int n, float* a, int lda, int* info) { spotrf_(&u, &n, a, &lda, info, 1); }
  static void getrf(int m, int n, float* a, int lda, int* ipiv, int* info) { sgetrf_(&m, &n, a, &lda, ipiv, info); }
  static void getri(int n, float* a, int lda, const int* ipiv, float* work, int lwork, int* info) {
    sgetri_(&n, a, &lda, ipiv, work, &lwork, info);
  }
  static void getrs(char t, int n, int nrhs, const float* a, int lda, const int* ipiv, float* b, int ldb, int* info) {
    sgetrs_(&t, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
  }
  static void geqrf(int m, int n, float* a, int lda, float* tau, float* work, int lwork, int* info) {
    sgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
  }
  static void orgqr(int m, int n, int k, float* a, int lda, const float* tau, float* work, int lwork, int* info) {
    sorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
  }
  static void syevd(char jobz, char uplo, int n, float* a, int lda, float* w, float* work, int lwork, int* iwork,
                    int liwork, int* info) {
    ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
  }
  static void gesdd(char jobz, int m, int n, float* a, int lda, float* s, float* u, int ldu, float* vt, int ldvt,
                    float* work, int lwork, int* iwork, int* info) {
    sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
  }
};
template <> struct Lapack<double> {
  static void potrf(char u, int n, double* a, int lda, int* info) { dpotrf_(&u, &n, a, &lda, info, 1); }
  static void getrf(int m, int n, double* a, int lda, int* ipiv, int* info) { dgetrf_(&m, &n, a, &lda, ipiv, info); }
  static void getri(int n, double* a, int lda, const int* ipiv, double* work, int lwork, int* info) {
    dgetri_(&n, a, &lda, ipiv, work, &lwork, info);
  }
  static void getrs(char t, int n, int nrhs, const double* a, int lda, const int* ipiv, double* b, int ldb,
                    int* info) {
    dgetrs_(&t, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
  }
  static void geqrf(int m, int n, double* a, int lda, double* tau, double* work, int lwork, int* info) {
    dgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
  }
  static void orgqr(int m, int n, int k, double* a, int lda, const double* tau, double* work, int lwork, int* info) {
    dorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
  }
  static void syevd(char jobz, char uplo, int n, double* a, int lda, double* w, double* work, int lwork, int* iwork,
                    int liwork, int* info) {
    dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
  }
  static void gesdd(char jobz, int m, int n, double* a, int lda, double* s, double* u, int ldu, double* vt, int ldvt,
                    double* work, int lwork, int* iwork, int* info) {
    dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
  }
};

const char* shortName(ScalarType t) {
  switch (t) {
  case ScalarType::Float32: return "Float";
  case ScalarType::Float64: return "Double";
  case ScalarType::Float16: return "Half";
  case ScalarType::BFloat16: return "BFloat16";
  case ScalarType::Int64: return "Long";
  case ScalarType::Int32: return "Int";
  case ScalarType::Int16: return "Short";
  case ScalarType::Int8: return "Char";
  case ScalarType::UInt8: return "Byte";
  case ScalarType::Bool: return "Bool";
  default: return "unknown";
  }
}

// torch's checks of a linalg input: a (batch of) float32/float64 matrices, square where asked,
// on the CPU (or meta).
void checkInput(const char* op, const Tensor& A, bool square, const char* name = "A") {
  KILN_CHECK(A.dim() >= 2, "linalg.", op, ": The input tensor ", name, " must have at least 2 dimensions.");
  if (square)
    KILN_CHECK(A.size(-1) == A.size(-2), "linalg.", op, ": ", name,
               " must be batches of square matrices, but they are ", A.size(-2), " by ", A.size(-1), " matrices");
  ScalarType t = A.dtype();
  if (t == ScalarType::Float16 || t == ScalarType::BFloat16)
    throw Error(strCat("linalg.", op, ": Low precision dtypes not supported. Got ", shortName(t)));
  KILN_CHECK(t == ScalarType::Float32 || t == ScalarType::Float64, "linalg.", op,
             ": Expected a floating point or complex tensor as input. Got ", shortName(t));
  KILN_CHECK(A.isMeta() || A.device().type == DeviceType::CPU, "linalg.", op,
             ": kiln computes it on the CPU only (got a tensor on ", A.device().str(), ")");
}

DimVector batchOf(IntArrayRef sizes) {
  DimVector out;
  for (size_t i = 0; i + 2 < sizes.size(); ++i) out.push_back(sizes[i]);
  return out;
}

DimVector withMatrix(IntArrayRef batch, std::initializer_list<int64_t> tail) {
  DimVector out(batch);
  for (int64_t s : tail) out.push_back(s);
  return out;
}

int64_t product(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// Each matrix of A [..., m, n] stored column-major, one after the other: the row-major copy
// of A^T. A is contiguous row-major after it.
Tensor columnMajor(const Tensor& A) { return ops::contiguous(ops::transpose(A, -2, -1)); }

// The row-major tensor [..., rows, cols] of matrices stored column-major in `buffer` (each
// rows x cols, leading dimension ld).
template <typename T>
void storeRowMajor(const T* buffer, int64_t ld, int64_t rows, int64_t cols, T* out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = buffer[i + j * ld];
}

// " (Batch element 3)" where the input has batch dims, as torch's messages say.
std::string batchPrefix(const char* op, int64_t batchDims, int64_t b) {
  return batchDims ? strCat("linalg.", op, ": (Batch element ", b, "): ") : strCat("linalg.", op, ": ");
}

int lapackInt(int64_t n, const char* op) {
  KILN_CHECK(n <= std::numeric_limits<int>::max(), "linalg.", op, ": a matrix dimension of ", n,
             " is too large for LAPACK");
  return int(n);
}

// The broadcast batch shape of A [..., n, n] and B [..., rows, k] (torch's message on mismatch).
DimVector broadcastBatch(IntArrayRef a, IntArrayRef b) {
  size_t nd = std::max(a.size(), b.size());
  DimVector out(nd, 1);
  for (size_t i = 0; i < nd; ++i) {
    int64_t x = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    int64_t y = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    KILN_CHECK(x == y || x == 1 || y == 1, "The size of tensor a (", x, ") must match the size of tensor b (", y,
               ") at non-singleton dimension ", i);
    out[i] = x == 1 ? y : x;
  }
  return out;
}

} // namespace

// --------------------------------------------------------------------------- Cholesky
std::tuple<Tensor, Tensor> linalgCholeskyEx(const Tensor& self, bool upper, bool check_errors) {
  checkInput("cholesky", self, true);
  DimVector batch = batchOf(self.sizes());
  const int64_t n = self.size(-1), count = product(batch);
  Tensor info = ops::zeros(batch, ScalarType::Int32, self.device());
  if (self.isMeta()) return {Tensor::empty(self.sizes(), self.dtype(), self.device()), info};
  // The row-major copy is A^T column-major, and A^T = A: potrf on its upper triangle (the lower
  // triangle of A, torch's default) leaves U = L^T column-major, i.e. L row-major; with upper,
  // the lower triangle of A^T (A's upper) gives L' = U^T column-major, i.e. U row-major.
  Tensor L = ops::clone(ops::contiguous(self));
  int* infos = info.data<int>();
  const int ni = lapackInt(n, "cholesky");
  KILN_DISPATCH_FLOATING(self.dtype(), "linalg.cholesky", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      T* a = L.data<T>();
      for (int64_t b = 0; b < count; ++b) {
        T* m = a + b * n * n;
        if (n > 0) Lapack<T>::potrf(upper ? 'L' : 'U', ni, m, std::max(1, ni), &infos[b]);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            if (upper ? j < i : j > i) m[i * n + j] = T(0);
      }
    }
  });
  if (check_errors) {
    for (int64_t b = 0; b < count; ++b)
      if (infos[b] != 0)
        throw LinAlgError(strCat(batchPrefix("cholesky", int64_t(batch.size()), b),
                                 "The factorization could not be completed because the input is not "
                                 "positive-definite (the leading minor of order ",
                                 infos[b], " is not positive-definite)."));
  }
  return {L, info};
}

// --------------------------------------------------------------------------- LU: inv, det, slogdet
namespace {

// LU-factorizes every matrix of `a` (column-major copies, n x n) in place; the pivots per matrix
// (1-based) and the info codes.
template <typename T> void luFactorAll(T* a, int64_t count, int n, std::vector<int>& pivots, std::vector<int>& infos) {
  pivots.assign(size_t(count) * size_t(std::max(n, 1)), 0);
  infos.assign(size_t(count), 0);
  if (n == 0) return;
  for (int64_t b = 0; b < count; ++b)
    Lapack<T>::getrf(n, n, a + b * int64_t(n) * n, n, pivots.data() + b * n, &infos[size_t(b)]);
}

} // namespace

std::tuple<Tensor, Tensor> linalgInvEx(const Tensor& A, bool check_errors) {
  checkInput("inv", A, true);
  DimVector batch = batchOf(A.sizes());
  const int64_t n = A.size(-1), count = product(batch);
  Tensor info = ops::zeros(batch, ScalarType::Int32, A.device());
  if (A.isMeta()) return {Tensor::empty(A.sizes(), A.dtype(), A.device()), info};
  // The row-major copy is A^T column-major; its inverse (A^-1)^T column-major is A^-1 row-major.
  Tensor out = ops::clone(ops::contiguous(A));
  const int ni = lapackInt(n, "inv");
  std::vector<int> pivots, infos;
  KILN_DISPATCH_FLOATING(A.dtype(), "linalg.inv", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      T* a = out.data<T>();
      luFactorAll(a, count, ni, pivots, infos);
      if (n == 0) return;
      T query;
      int lwork = -1, q = 0;
      Lapack<T>::getri(ni, a, ni, pivots.data(), &query, lwork, &q);
      lwork = std::max(1, int(query));
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < count; ++b) {
        if (infos[size_t(b)] != 0) continue; // singular: getri would divide by the zero pivot
        Lapack<T>::getri(ni, a + b * n * n, ni, pivots.data() + b * n, work.data(), lwork, &q);
      }
    }
  });
  int* codes = info.data<int>();
  for (int64_t b = 0; b < count; ++b) {
    codes[b] = infos.empty() ? 0 : infos[size_t(b)];
    if (check_errors && codes[b] != 0)
      throw LinAlgError(strCat(batchPrefix("inv", int64_t(batch.size()), b), "The diagonal element ", codes[b],
                               " is zero, the inversion could not be completed because the input matrix is "
                               "singular."));
  }
  // A singular matrix's inverse is not defined: inf, as the division by its zero pivot gives.
  if (!check_errors)
    KILN_DISPATCH_FLOATING(A.dtype(), "linalg.inv", [&]<typename T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
        for (int64_t b = 0; b < count; ++b)
          if (codes[b] != 0)
            std::fill(out.data<T>() + b * n * n, out.data<T>() + (b + 1) * n * n, std::numeric_limits<T>::infinity());
    });
  return {out, info};
}

namespace {

// sign and log|det| of each matrix of A from its LU factors (det(A^T) = det(A)).
template <typename T> void signLogDet(const Tensor& A, T* sign, T* logabs, T* det) {
  const int64_t n = A.size(-1), count = product(batchOf(A.sizes()));
  Tensor lu = ops::clone(ops::contiguous(A));
  std::vector<int> pivots, infos;
  luFactorAll(lu.data<T>(), count, int(n), pivots, infos);
  for (int64_t b = 0; b < count; ++b) {
    const T* m = lu.data<T>() + b * n * n;
    T s = T(1), l = T(0), d = T(1);
    for (int64_t i = 0; i < n; ++i) {
      T u = m[i * n + i];
      if (pivots[size_t(b * n + i)] != i + 1) { s = -s; d = -d; }
      if (u < 0) s = -s;
      l += std::log(std::abs(u));
      d *= u;
    }
    if (l == -std::numeric_limits<T>::infinity()) s = T(0); // a zero pivot: det = 0
    if (sign) sign[b] = s;
    if (logabs) logabs[b] = l;
    if (det) det[b] = s == T(0) ? T(0) : d;
  }
}

} // namespace

Tensor linalgDet(const Tensor& A) {
  checkInput("det", A, true);
  Tensor out = Tensor::empty(batchOf(A.sizes()), A.dtype(), A.device());
  if (A.isMeta()) return out;
  KILN_DISPATCH_FLOATING(A.dtype(), "linalg.det", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      signLogDet<T>(A, nullptr, nullptr, out.data<T>());
  });
  return out;
}

std::tuple<Tensor, Tensor> linalgSlogdet(const Tensor& A) {
  checkInput("slogdet", A, true);
  Tensor sign = Tensor::empty(batchOf(A.sizes()), A.dtype(), A.device());
  Tensor logabs = Tensor::empty(batchOf(A.sizes()), A.dtype(), A.device());
  if (A.isMeta()) return {sign, logabs};
  KILN_DISPATCH_FLOATING(A.dtype(), "linalg.slogdet", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      signLogDet<T>(A, sign.data<T>(), logabs.data<T>(), nullptr);
  });
  return {sign, logabs};
}

// --------------------------------------------------------------------------- solve
namespace {

// torch's rule: B is a (batch of) vector(s) when it is 1-D or has A's shape without the last dim.
bool isVectorRhs(const Tensor& A, const Tensor& B) {
  if (B.dim() == 1) return true;
  if (B.dim() != A.dim() - 1) return false;
  IntArrayRef a = A.sizes(), b = B.sizes();
  return std::equal(b.begin(), b.end(), a.begin());
}

void checkSameDtype(const char* op, const Tensor& A, const Tensor& B) {
  KILN_CHECK(A.dtype() == B.dtype(), "linalg.", op, ": Expected A and B to have the same dtype, but found A of type ",
             shortName(A.dtype()), " and B of type ", shortName(B.dtype()), " instead");
  KILN_CHECK(A.device().type == B.device().type, "linalg.", op,
             ": Expected all tensors to be on the same device, but found at least two devices, ", A.device().str(),
             " and ", B.device().str(), "!");
}

} // namespace

Tensor linalgSolve(const Tensor& A, const Tensor& B, bool left) {
  checkInput("solve", A, true);
  checkSameDtype("solve", A, B);
  const bool vector = isVectorRhs(A, B);
  KILN_CHECK(left || !vector, "linalg.solve: Vector broadcasting of the left hand side is not supported for "
                              "left=False. In this case linalg.solve is equivalent to B / A.squeeze(-1)");
  if (!left) // X A = B  <=>  A^T X^T = B^T
    return ops::transpose(linalgSolve(ops::transpose(A, -2, -1), ops::transpose(B, -2, -1), true), -2, -1);
  const int64_t n = A.size(-1);
  Tensor Bm = vector ? ops::unsqueeze(B, -1) : B;
  KILN_CHECK(Bm.size(-2) == n, "linalg.solve: Incompatible shapes of A and B for the equation AX = B (", A.size(-2),
             "x", A.size(-1), " and ", Bm.size(-2), "x", Bm.size(-1), ")");
  const int64_t k = Bm.size(-1);
  DimVector batch = broadcastBatch(batchOf(A.sizes()), batchOf(Bm.sizes()));
  DimVector outShape = withMatrix(batch, {n, k});
  if (A.isMeta()) {
    Tensor X = Tensor::empty(outShape, A.dtype(), A.device());
    return vector ? ops::contiguous(ops::squeeze(X, -1)) : X;
  }
  const int64_t count = product(batch);
  // A's row-major copy is A^T column-major: getrs with 'T' solves (A^T)^T X = B, B column-major.
  Tensor lu = ops::clone(ops::contiguous(ops::expand(A, withMatrix(batch, {n, n}))));
  Tensor x = ops::clone(columnMajor(ops::expand(Bm, outShape)));
  const int ni = lapackInt(n, "solve"), ki = lapackInt(k, "solve");
  std::vector<int> pivots, infos;
  KILN_DISPATCH_FLOATING(A.dtype(), "linalg.solve", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      T* a = lu.data<T>();
      luFactorAll(a, count, ni, pivots, infos);
      for (int64_t b = 0; b < count; ++b) {
        if (infos[size_t(b)] != 0)
          throw LinAlgError(strCat(batchPrefix("solve", int64_t(batch.size()), b),
                                   "The solver failed because the input matrix is singular."));
        int q = 0;
        if (n > 0 && k > 0)
          Lapack<T>::getrs('T', ni, ki, a + b * n * n, ni, pivots.data() + b * n, x.data<T>() + b * n * k, ni, &q);
      }
    }
  });
  Tensor X = ops::contiguous(ops::transpose(x, -2, -1));
  return vector ? ops::contiguous(ops::squeeze(X, -1)) : X;
}

Tensor linalgSolveTriangular(const Tensor& self, const Tensor& B, bool upper, bool left, bool unitriangular) {
  checkInput("solve_triangular", self, true);
  KILN_CHECK(B.dim() >= 2, "linalg.solve_triangular: The input tensor B must have at least 2 dimensions.");
  checkSameDtype("solve_triangular", self, B);
  if (!left) // X A = B  <=>  A^T X^T = B^T, A^T triangular the other way
    return ops::transpose(linalgSolveTriangular(ops::transpose(self, -2, -1), ops::transpose(B, -2, -1), !upper,
                                                true, unitriangular),
                          -2, -1);
  const int64_t n = self.size(-1), k = B.size(-1);
  KILN_CHECK(B.size(-2) == n, "linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B (",
             n, "x", n, " and ", B.size(-2), "x", k, ")");
  DimVector batch = broadcastBatch(batchOf(self.sizes()), batchOf(B.sizes()));
  DimVector outShape = withMatrix(batch, {n, k});
  if (self.isMeta()) return Tensor::empty(outShape, self.dtype(), self.device());
  const int64_t count = product(batch);
  Tensor a = ops::contiguous(ops::expand(self, withMatrix(batch, {n, n})));
  Tensor x = ops::clone(ops::contiguous(ops::expand(B, outShape)));
  KILN_DISPATCH_FLOATING(self.dtype(), "linalg.solve_triangular", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      for (int64_t b = 0; b < count; ++b) {
        const T* m = a.data<T>() + b * n * n;
        T* rows = x.data<T>() + b * n * k;
        // Substitution row by row (each row of X holds k right-hand sides).
        for (int64_t step = 0; step < n; ++step) {
          const int64_t i = upper ? n - 1 - step : step;
          T* xi = rows + i * k;
          const int64_t lo = upper ? i + 1 : 0, hi = upper ? n : i;
          for (int64_t p = lo; p < hi; ++p) {
            const T c = m[i * n + p];
            if (c == T(0)) continue;
            const T* xp = rows + p * k;
            for (int64_t j = 0; j < k; ++j) xi[j] -= c * xp[j];
          }
          if (!unitriangular) {
            const T d = m[i * n + i];
            for (int64_t j = 0; j < k; ++j) xi[j] /= d;
          }
        }
      }
    }
  });
  return x;
}

// --------------------------------------------------------------------------- QR
std::tuple<Tensor, Tensor> linalgQr(const Tensor& A, const std::string& mode) {
  checkInput("qr", A, false);
  KILN_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "qr received unrecognized mode '", mode,
             "' but expected one of 'reduced' (default), 'r', or 'complete'");
  DimVector batch = batchOf(A.sizes());
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), count = product(batch);
  const bool complete = mode == "complete";
  const int64_t qCols = complete ? m : k, rRows = complete ? m : k;
  DimVector noQ; // mode 'r': Q is an empty vector, shape [0] (torch's)
  noQ.push_back(0);
  Tensor Q = mode == "r" ? Tensor::empty(noQ, A.dtype(), A.device())
                         : Tensor::empty(withMatrix(batch, {m, qCols}), A.dtype(), A.device());
  Tensor R = ops::zeros(withMatrix(batch, {rRows, n}), A.dtype(), A.device());
  if (A.isMeta()) return {Q, R};
  // Column-major m x max(n, qCols) per matrix: A in the first n columns; orgqr builds Q's
  // columns over the reflectors in place.
  const int64_t cols = std::max(n, qCols);
  const int mi = lapackInt(m, "qr"), ni = lapackInt(n, "qr"), ki = int(k), ld = std::max(1, mi);
  Tensor cm = columnMajor(A);
  KILN_DISPATCH_FLOATING(A.dtype(), "linalg.qr", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      std::vector<T> a(size_t(std::max<int64_t>(1, m * cols))), tau(size_t(std::max<int64_t>(1, k)));
      for (int64_t b = 0; b < count; ++b) {
        std::fill(a.begin(), a.end(), T(0));
        std::copy(cm.data<T>() + b * m * n, cm.data<T>() + (b + 1) * m * n, a.begin());
        int info = 0;
        if (k > 0) {
          T query;
          Lapack<T>::geqrf(mi, ni, a.data(), ld, tau.data(), &query, -1, &info);
          std::vector<T> work(size_t(std::max(1, int(query))));
          Lapack<T>::geqrf(mi, ni, a.data(), ld, tau.data(), work.data(), int(work.size()), &info);
        }
        T* r = R.data<T>() + b * rRows * n;
        for (int64_t i = 0; i < std::min(rRows, m); ++i)
          for (int64_t j = i; j < n; ++j) r[i * n + j] = a[size_t(i + j * m)];
        if (mode == "r") continue;
        T* q = Q.data<T>() + b * m * qCols;
        if (qCols == 0 || m == 0) continue;
        if (k == 0) { // no reflectors: Q is the identity's first columns
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < qCols; ++j) q[i * qCols + j] = T(i == j);
          continue;
        }
        const int qi = int(qCols);
        T query;
        Lapack<T>::orgqr(mi, qi, ki, a.data(), ld, tau.data(), &query, -1, &info);
        std::vector<T> work(size_t(std::max(1, int(query))));
        Lapack<T>::orgqr(mi, qi, ki, a.data(), ld, tau.data(), work.data(), int(work.size()), &info);
        storeRowMajor(a.data(), m, m, qCols, q);
      }
    }
  });
  return {Q, R};
}

// --------------------------------------------------------------------------- eigh
namespace {

std::tuple<Tensor, Tensor> eigh(const char* op, const Tensor& self, const std::string& uplo, bool vectors) {
  checkInput(op, self, true);
  KILN_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u",
             "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  DimVector batch = batchOf(self.sizes());
  const int64_t n = self.size(-1), count = product(batch);
  Tensor w = Tensor::empty(withMatrix(batch, {n}), self.dtype(), self.device());
  Tensor V = vectors ? Tensor::empty(self.sizes(), self.dtype(), self.device()) : Tensor();
  if (self.isMeta() || n == 0) return {w, V};
  // The row-major copy is A^T column-major: its upper triangle is A's lower one.
  const bool lower = uplo == "L" || uplo == "l";
  Tensor a = ops::clone(ops::contiguous(self));
  const int ni = lapackInt(n, op);
  KILN_DISPATCH_FLOATING(self.dtype(), op, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const char jobz = vectors ? 'V' : 'N', tri = lower ? 'U' : 'L';
      T query;
      int iquery = 0, info = 0;
      Lapack<T>::syevd(jobz, tri, ni, a.data<T>(), ni, w.data<T>(), &query, -1, &iquery, -1, &info);
      std::vector<T> work(size_t(std::max(1, int(query))));
      std::vector<int> iwork(size_t(std::max(1, iquery)));
      for (int64_t b = 0; b < count; ++b) {
        T* m = a.data<T>() + b * n * n;
        Lapack<T>::syevd(jobz, tri, ni, m, ni, w.data<T>() + b * n, work.data(), int(work.size()), iwork.data(),
                         int(iwork.size()), &info);
        if (info > 0)
          throw LinAlgError(strCat(batchPrefix(op, int64_t(batch.size()), b),
                                   "The algorithm failed to converge because the input matrix is ill-conditioned "
                                   "or has too many repeated eigenvalues (error code: ",
                                   info, ")."));
        if (vectors) storeRowMajor(m, n, n, n, V.data<T>() + b * n * n);
      }
    }
  });
  return {w, V};
}

} // namespace

std::tuple<Tensor, Tensor> linalgEigh(const Tensor& self, const std::string& UPLO) {
  return eigh("eigh", self, UPLO, true);
}

Tensor linalgEigvalsh(const Tensor& self, const std::string& UPLO) {
  return std::get<0>(eigh("eigvalsh", self, UPLO, false));
}

// --------------------------------------------------------------------------- SVD
namespace {

void checkDriver(const char* op, const std::optional<std::string>& driver) {
  // torch accepts a driver only with CUDA inputs (cuSOLVER's gesvd / gesvdj / gesvda).
  KILN_CHECK(!driver, "linalg.", op, ": keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER "
                      "backend.");
}

std::tuple<Tensor, Tensor, Tensor> svd(const char* op, const Tensor& A, bool vectors, bool full) {
  checkInput(op, A, false);
  DimVector batch = batchOf(A.sizes());
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), count = product(batch);
  const int64_t uCols = full ? m : k, vRows = full ? n : k;
  Tensor S = Tensor::empty(withMatrix(batch, {k}), A.dtype(), A.device());
  Tensor U = vectors ? Tensor::empty(withMatrix(batch, {m, uCols}), A.dtype(), A.device()) : Tensor();
  Tensor Vh = vectors ? Tensor::empty(withMatrix(batch, {vRows, n}), A.dtype(), A.device()) : Tensor();
  if (A.isMeta()) return {U, S, Vh};
  if (k == 0) { // an empty matrix: U and Vh are identities (complete) or empty
    if (vectors) {
      U = ops::contiguous(ops::expand(ops::eye(m, uCols, A.dtype(), A.device()), U.sizes()));
      Vh = ops::contiguous(ops::expand(ops::eye(vRows, n, A.dtype(), A.device()), Vh.sizes()));
    }
    return {U, S, Vh};
  }
  Tensor cm = ops::clone(columnMajor(A));
  const int mi = lapackInt(m, op), ni = lapackInt(n, op), vi = int(vRows);
  KILN_DISPATCH_FLOATING(A.dtype(), op, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const char jobz = !vectors ? 'N' : full ? 'A' : 'S';
      std::vector<T> u(size_t(vectors ? m * uCols : 1)), vt(size_t(vectors ? vRows * n : 1));
      std::vector<int> iwork(size_t(8 * k));
      T query;
      int info = 0;
      const int ldu = std::max(1, mi), ldvt = std::max(1, vi);
      Lapack<T>::gesdd(jobz, mi, ni, cm.data<T>(), mi, S.data<T>(), u.data(), ldu, vt.data(), ldvt, &query, -1,
                       iwork.data(), &info);
      std::vector<T> work(size_t(std::max(1, int(query))));
      for (int64_t b = 0; b < count; ++b) {
        Lapack<T>::gesdd(jobz, mi, ni, cm.data<T>() + b * m * n, mi, S.data<T>() + b * k, u.data(), ldu, vt.data(),
                         ldvt, work.data(), int(work.size()), iwork.data(), &info);
        if (info > 0)
          throw LinAlgError(strCat(batchPrefix(op, int64_t(batch.size()), b),
                                   "The algorithm failed to converge because the input matrix is ill-conditioned "
                                   "or has too many repeated singular values (error code: ",
                                   info, ")."));
        KILN_CHECK(info == 0, "linalg.", op, ": LAPACK gesdd rejected argument ", -info,
                   " (the input has NaN or infinite entries?)");
        if (vectors) {
          storeRowMajor(u.data(), m, m, uCols, U.data<T>() + b * m * uCols);
          storeRowMajor(vt.data(), vRows, vRows, n, Vh.data<T>() + b * vRows * n);
        }
      }
    }
  });
  return {U, S, Vh};
}

} // namespace

std::tuple<Tensor, Tensor, Tensor> linalgSvd(const Tensor& A, bool full_matrices,
                                             const std::optional<std::string>& driver) {
  checkDriver("svd", driver);
  return svd("svd", A, true, full_matrices);
}

Tensor linalgSvdvals(const Tensor& A, const std::optional<std::string>& driver) {
  checkDriver("svdvals", driver);
  return std::get<1>(svd("svdvals", A, false, false));
}

} // namespace kiln::kernels
