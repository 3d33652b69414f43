// The fake cuBLAS: the entry points kiln's runtime/cuda/CudaBlas.cpp binds, computing on the
// host memory behind the fake driver's device pointers. Column-major as cuBLAS: kiln's
// row-major GEMMs must reach it with their operands swapped, as on a GPU. Every operand's
// extent is checked against the live allocation it lies in.
#include <bit>
#include <cstdint>
#include <cstring>

#include "test/fake_cuda/FakeCuda.h"

namespace {

constexpr int kSuccess = 0, kNotInitialized = 1, kInvalidValue = 7, kNotSupported = 15;
// cudaDataType and cublasComputeType_t values (library_types.h, cublas_api.h).
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
constexpr int kCompute32F = 68, kCompute64F = 70;

struct Handle {
  void* stream = nullptr;
};

size_t elementSize(int type) {
  switch (type) {
  case kR32F: return 4;
  case kR64F: return 8;
  case kR16F:
  case kR16BF: return 2;
  default: return 0;
  }
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000 | (man << 13);
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (man << 13);
  else if (man == 0) bits = sign;
  else { // subnormal: normalize
    exp = 113;
    while (!(man & 0x400)) { man <<= 1; --exp; }
    bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

float bf16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return uint16_t((bits >> 16) | 0x40); // quiet NaN
  return uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);                 // nearest even
}

double load(const char* p, int type, int64_t i) {
  switch (type) {
  case kR32F: { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
  case kR64F: { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
  case kR16F: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return halfToFloat(v); }
  default: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return bf16ToFloat(v); }
  }
}

void store(char* p, int type, int64_t i, double value) {
  switch (type) {
  case kR32F: { float v = float(value); std::memcpy(p + 4 * i, &v, 4); return; }
  case kR64F: std::memcpy(p + 8 * i, &value, 8); return;
  case kR16F: { uint16_t v = floatToHalf(float(value)); std::memcpy(p + 2 * i, &v, 2); return; }
  default: { uint16_t v = floatToBf16(float(value)); std::memcpy(p + 2 * i, &v, 2); return; }
  }
}

// The host address of a column-major rows x cols operand (leading dimension ld) repeated
// `batch` times `stride` elements apart, when all of it is device memory.
char* operand(const void* ptr, int type, int64_t rows, int64_t cols, int64_t ld, int64_t stride, int batch) {
  if (rows == 0 || cols == 0 || batch == 0) return static_cast<char*>(const_cast<void*>(ptr));
  if (ld < rows) return nullptr;
  int64_t last = (batch - 1) * stride + (cols - 1) * ld + rows;
  return kiln::fake_cuda::hostRange(reinterpret_cast<uintptr_t>(ptr), size_t(last) * elementSize(type));
}

// C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] on host memory.
void gemm(const char* pa, const char* pb, char* pc, int Atype, int Ctype, int transa, int transb, int64_t m,
          int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc, int64_t strideA, int64_t strideB,
          int64_t strideC, int64_t batch, double a, double b) {
  int Btype = Atype;
  for (int64_t bt = 0; bt < batch; ++bt)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          double x = load(pa, Atype, bt * strideA + (transa ? l + i * lda : i + l * lda));
          double y = load(pb, Btype, bt * strideB + (transb ? j + l * ldb : l + j * ldb));
          sum += x * y;
        }
        int64_t at = bt * strideC + i + j * ldc;
        // beta == 0: C is not read (it may hold NaN), as cuBLAS.
        store(pc, Ctype, at, a * sum + (b == 0 ? 0.0 : b * load(pc, Ctype, at)));
      }
}

} // namespace

extern "C" {

int cublasCreate_v2(void** handle) {
  *handle = new Handle();
  return kSuccess;
}

int cublasDestroy_v2(void* handle) {
  if (!handle) return kNotInitialized;
  delete static_cast<Handle*>(handle);
  return kSuccess;
}

int cublasSetStream_v2(void* handle, void* stream) {
  if (!handle) return kNotInitialized;
  static_cast<Handle*>(handle)->stream = stream;
  return kSuccess;
}

const char* cublasGetStatusString(int status) {
  switch (status) {
  case kSuccess: return "CUBLAS_STATUS_SUCCESS";
  case kNotInitialized: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case kInvalidValue: return "CUBLAS_STATUS_INVALID_VALUE";
  case kNotSupported: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "CUBLAS_STATUS (fake cuBLAS)";
  }
}

// C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b], column-major; op = transpose when trans* is 1.
// Sums in double (a GPU's order differs; tests compare with a tolerance).
int cublasGemmStridedBatchedEx(void* handle, int transa, int transb, int m, int n, int k, const void* alpha,
                               const void* A, int Atype, int lda, long long strideA, const void* B, int Btype,
                               int ldb, long long strideB, const void* beta, void* C, int Ctype, int ldc,
                               long long strideC, int batch, int computeType, int algo) {
  if (!handle) return kNotInitialized;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || transa < 0 || transa > 1 || transb < 0 || transb > 1)
    return kInvalidValue;
  // cuBLAS's combinations: one type throughout, or 16-bit A and B into an f32 C.
  bool mixed = Ctype == kR32F && (Atype == kR16F || Atype == kR16BF);
  if (Atype != Btype || (Atype != Ctype && !mixed) || elementSize(Atype) == 0) return kNotSupported;
  if (computeType != (Atype == kR64F ? kCompute64F : kCompute32F)) return kNotSupported;
  double a = computeType == kCompute64F ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  double b = computeType == kCompute64F ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  // Operands are checked now and again when the work runs (at each launch of a CUDA graph that
  // captured it: the handle's stream in capture records it, FakeCudaDriver.cpp).
  auto operands = [=](const char*& pa, const char*& pb, char*& pc) {
    pa = operand(A, Atype, transa ? k : m, transa ? m : k, lda, strideA, batch);
    pb = operand(B, Btype, transb ? n : k, transb ? k : n, ldb, strideB, batch);
    pc = operand(C, Ctype, m, n, ldc, strideC, batch);
    return pc && (k == 0 || (pa && pb));
  };
  const char *checkA, *checkB;
  char* checkC;
  if (!operands(checkA, checkB, checkC)) return kInvalidValue;
  auto work = [=] {
    const char *pa, *pb;
    char* pc;
    if (!operands(pa, pb, pc)) return false;
    gemm(pa, pb, pc, Atype, Ctype, transa, transb, m, n, k, lda, ldb, ldc, strideA, strideB, strideC, batch, a, b);
    return true;
  };
  if (!kiln::fake_cuda::recordIfCapturing(static_cast<Handle*>(handle)->stream, work)) work();
  return kSuccess;
}

} // extern "C"
