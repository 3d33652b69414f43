// embedding (rows of weight gathered by index) and embedding_dense_backward (gradient rows summed
// into the rows they came from). The backward splits the weight's rows among threads, each
// thread scanning every index and adding only into its own rows: no two threads write one row.
#include <cstdint>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/RowLoops.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kParallelGrain = 32768;

void checkIndices(const char* op, const Tensor& indices) {
  const ScalarType t = indices.dtype();
  KILN_CHECK(t == ScalarType::Int64 || t == ScalarType::Int32,
             "Expected tensor for argument #1 'indices' to have one of the following scalar types: ",
             "Long, Int; but got kiln.", scalarTypeShortName(t), "Tensor instead (while checking ",
             "arguments for ", op, ")");
}

// The indices as int64 values, checked to lie in [0, rows).
std::vector<int64_t> readIndices(const Tensor& indices, int64_t rows) {
  Tensor idx = cpu::contiguousInput(indices);
  std::vector<int64_t> out(size_t(idx.numel()));
  bool inRange = true;
  auto copy = [&]<typename I>() {
    const I* p = idx.data<I>();
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = int64_t(p[i]);
      inRange = inRange && out[i] >= 0 && out[i] < rows;
    }
  };
  if (idx.dtype() == ScalarType::Int64)
    copy.template operator()<int64_t>();
  else
    copy.template operator()<int32_t>();
  KILN_CHECK_INDEX(inRange, "index out of range in self");
  return out;
}

// gradWeight[idx[i]] += grad[i] (scaled by 1 / count when counts are given) for every i whose
// index is not paddingIdx; rows are split among threads, each scanning every index.
template <typename T>
void accumulateRows(const T* grad, const std::vector<int64_t>& idx, const std::vector<int64_t>& counts,
                    int64_t numWeights, int64_t dim, int64_t paddingIdx, T* out) {
  using A = std::conditional_t<std::is_same_v<T, bool>, bool, opmath_t<T>>;
  const int64_t count = int64_t(idx.size());
  const bool scaled = !counts.empty();
  const int threads = count * dim > kParallelGrain ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t r0 = numWeights * t / nt, r1 = numWeights * (t + 1) / nt;
    std::fill(out + r0 * dim, out + r1 * dim, T(0));
    // 16-bit floats accumulate in float rows, rounded once at the end.
    std::vector<A> wide;
    if constexpr (!std::is_same_v<T, A>) wide.assign(size_t((r1 - r0) * dim), A(0));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = idx[size_t(i)];
      if (row < r0 || row >= r1 || row == paddingIdx) continue;
      const T* src = grad + i * dim;
      if constexpr (std::is_same_v<T, bool>) {
        T* dst = out + row * dim;
        for (int64_t j = 0; j < dim; ++j) dst[j] = dst[j] || src[j];
      } else if constexpr (std::is_same_v<T, A>) {
        T* dst = out + row * dim;
        if (scaled) {
          const T scale = T(1) / T(counts[size_t(row)]);
          for (int64_t j = 0; j < dim; ++j) dst[j] += src[j] * scale;
        } else {
          for (int64_t j = 0; j < dim; ++j) dst[j] += src[j];
        }
      } else {
        A* dst = wide.data() + (row - r0) * dim;
        const A scale = scaled ? A(1) / A(counts[size_t(row)]) : A(1);
        for (int64_t j = 0; j < dim; ++j) dst[j] += A(src[j]) * scale;
      }
    }
    if constexpr (!std::is_same_v<T, A>) {
      for (int64_t j = 0; j < (r1 - r0) * dim; ++j) out[r0 * dim + j] = T(wide[size_t(j)]);
    }
  }
}

} // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t paddingIdx,
                 bool scaleGradByFreq, bool sparse) {
  (void)paddingIdx, (void)scaleGradByFreq, (void)sparse; // they shape the backward only
  KILN_CHECK(weight.dim() == 2, "'weight' must be 2-D");
  checkIndices("embedding", indices);
  const int64_t rows = weight.size(0), dim = weight.size(1);
  DimVector outSizes(indices.sizes());
  outSizes.push_back(dim);
  Tensor out = Tensor::empty(outSizes, weight.dtype(), weight.device());
  if (out.isMeta() || indices.isMeta()) return out;
  std::vector<int64_t> idx = readIndices(indices, rows);
  if (out.numel() == 0) return out;
  Tensor w = cpu::contiguousInput(weight);
  const size_t rowBytes = size_t(dim) * elementSize(weight.dtype());
  const char* src = w.rawData();
  char* dst = out.rawData();
  const int64_t count = int64_t(idx.size());
#pragma omp parallel for schedule(static) if (out.numel() > kParallelGrain)
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(dst + size_t(i) * rowBytes, src + size_t(idx[size_t(i)]) * rowBytes, rowBytes);
  return out;
}

Tensor embeddingDenseBackward(const Tensor& gradOutput, const Tensor& indices, int64_t numWeights,
                              int64_t paddingIdx, bool scaleGradByFreq) {
  checkIndices("embedding_backward", indices);
  KILN_CHECK(numWeights >= 0, "embedding_dense_backward: num_weights must be non-negative, got ",
             numWeights);
  KILN_CHECK(gradOutput.dim() == indices.dim() + 1 &&
                 IntArrayRef(gradOutput.sizes().data(), size_t(indices.dim())) == indices.sizes(),
             "embedding_dense_backward: expected grad_output of size ", indices.shapeString(),
             " + [embedding_dim], but got ", gradOutput.shapeString());
  const int64_t dim = gradOutput.size(-1);
  Tensor gw = Tensor::empty({numWeights, dim}, gradOutput.dtype(), gradOutput.device());
  if (gw.isMeta() || indices.isMeta()) return gw;
  std::vector<int64_t> idx = readIndices(indices, numWeights);
  if (gw.numel() == 0) return gw;
  Tensor go = cpu::contiguousInput(gradOutput);
  std::vector<int64_t> counts;
  if (scaleGradByFreq) {
    counts.assign(size_t(numWeights), 0);
    for (int64_t i : idx) ++counts[size_t(i)];
  }
  KILN_DISPATCH_ALL(gradOutput.dtype(), "embedding_dense_backward", [&]<typename T>() {
    accumulateRows<T>(go.data<T>(), idx, counts, numWeights, dim, paddingIdx, gw.data<T>());
  });
  return gw;
}

} // namespace kiln::kernels
