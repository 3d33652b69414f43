// cuBLAS through dlopen (see CudaBlas.h): one handle per device, created in the device's
// primary context on first use; the stream is set before each call.
#include "runtime/cuda/CudaBlas.h"

#include <cstdint>
#include <dlfcn.h>

#include <cstdlib>
#include <limits>
#include <mutex>

#include "runtime/Error.h"
#include "runtime/cuda/CudaDevice.h"

namespace kiln::cuda {
namespace {

// cudaDataType, cublasComputeType_t, cublasOperation_t and cublasGemmAlgo_t values
// (library_types.h, cublas_api.h).
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
constexpr int kCompute32F = 68, kCompute64F = 70;
constexpr int kOpN = 0, kOpT = 1;
constexpr int kGemmDefault = -1;

struct Cublas {
  std::string path;
  int (*create)(void**) = nullptr;
  int (*setStream)(void*, CUstream) = nullptr;
  const char* (*statusString)(int) = nullptr;
  int (*gemmEx)(void*, int, int, int, int, int, const void*, const void*, int, int, long long, const void*, int,
                int, long long, const void*, void*, int, int, long long, int, int, int) = nullptr;
  void* handles[64] = {};
};

std::vector<std::string> candidates(const std::vector<std::string>& searchDirs) {
  std::vector<std::string> c;
  if (const char* env = std::getenv("KILN_CUBLAS"); env && *env) c.push_back(env);
  for (const std::string& d : searchDirs) {
    if (d.empty()) continue;
    c.push_back(d + "/nvidia/cu13/lib/libcublas.so.13");
    c.push_back(d + "/nvidia/cublas/lib/libcublas.so.12");
  }
  // The toolkit's folder is not always on the loader's path (images with nvcc).
  for (const char* sys : {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13",
                          "/usr/local/cuda/lib64/libcublas.so.12"})
    c.push_back(sys);
  return c;
}

template <typename F> bool bind(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

std::mutex mutex;
Cublas* loaded = nullptr; // never freed: handles may be used until exit

// The process's cuBLAS (under `mutex`), or a RuntimeError listing what was tried.
Cublas& library(const std::vector<std::string>& searchDirs) {
  if (loaded) return *loaded;
  std::string tried;
  for (const std::string& path : candidates(searchDirs)) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      tried += "\n  " + path;
      continue;
    }
    auto* c = new Cublas();
    c->path = path;
    if (!bind(lib, "cublasCreate_v2", c->create) || !bind(lib, "cublasSetStream_v2", c->setStream) ||
        !bind(lib, "cublasGetStatusString", c->statusString) ||
        !bind(lib, "cublasGemmStridedBatchedEx", c->gemmEx)) {
      delete c;
      tried += "\n  " + path + " (not a cuBLAS 12+: an entry point is missing)";
      continue;
    }
    loaded = c;
    return *loaded;
  }
  throw Error(strCat("kiln: cuBLAS not found (a compiled CUDA program with a matrix product needs it; PyTorch's "
                     "CUDA wheels install nvidia/cu13/lib/libcublas.so.13, or set KILN_CUBLAS); tried:",
                     tried));
}

int dataType(ScalarType t) {
  switch (t) {
  case ScalarType::Float32: return kR32F;
  case ScalarType::Float64: return kR64F;
  case ScalarType::Float16: return kR16F;
  case ScalarType::BFloat16: return kR16BF;
  default: throw Error(strCat("kiln: cuBLAS GEMM: unsupported dtype ", scalarTypeName(t)));
  }
}

int checkedInt(int64_t v, const char* what) {
  KILN_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "kiln: cuBLAS GEMM: ", what, " = ", v,
             " does not fit cuBLAS's 32-bit int");
  return int(v);
}

} // namespace

std::string cublasPath(const std::vector<std::string>& searchDirs) {
  std::lock_guard<std::mutex> lock(mutex);
  try {
    return library(searchDirs).path;
  } catch (const Error&) {
    return "";
  }
}

void gemm(const RowMajorGemm& g, CudaStream stream, const std::vector<std::string>& searchDirs) {
  std::lock_guard<std::mutex> lock(mutex);
  Cublas& c = library(searchDirs);
  KILN_CHECK(stream.device >= 0 && stream.device < 64, "kiln: cuBLAS: device index ", stream.device);
  CudaDeviceGuard guard(stream.device);
  void*& handle = c.handles[stream.device];
  auto check = [&](int status, const char* call) {
    if (status != 0)
      throw Error(strCat(call, " failed: ", c.statusString(status), " (", scalarTypeName(g.dtype), " m=", g.m,
                         " n=", g.n, " k=", g.k, " batch=", g.batch, ")"));
  };
  if (!handle) check(c.create(&handle), "cublasCreate");
  check(c.setStream(handle, stream.handle), "cublasSetStream");
  int type = dataType(g.dtype);
  bool f64 = g.dtype == ScalarType::Float64;
  float alpha32 = float(g.alpha), beta32 = float(g.beta);
  const void* alpha = f64 ? static_cast<const void*>(&g.alpha) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&g.beta) : &beta32;
  // Row-major C [m, n] is column-major C^T [n, m] = op(B)^T op(A)^T: B comes first, and a
  // row-major operand's leading dimension is the column-major one of its transpose.
  // cuBLAS wants leading dimensions >= 1 even for empty operands.
  int lda = checkedInt(std::max<int64_t>(g.lda, 1), "lda");
  int ldb = checkedInt(std::max<int64_t>(g.ldb, 1), "ldb");
  int ldc = checkedInt(std::max<int64_t>(g.ldc, 1), "ldc");
  check(c.gemmEx(handle, g.transB ? kOpT : kOpN, g.transA ? kOpT : kOpN, checkedInt(g.n, "n"),
                 checkedInt(g.m, "m"), checkedInt(g.k, "k"), alpha, g.b, type, ldb, g.strideB, g.a,
                 type, lda, g.strideA, beta, g.c, dataType(g.outDtype), ldc, g.strideC, checkedInt(g.batch, "batch"),
                 f64 ? kCompute64F : kCompute32F, kGemmDefault),
        "cublasGemmStridedBatchedEx");
}

} // namespace kiln::cuda
