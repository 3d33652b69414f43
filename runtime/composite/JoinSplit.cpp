// stack and concat (in terms of cat), and the splitting ops, which return views.
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include <cstdint>

namespace kiln::kernels {

Tensor concatTensors(const std::vector<Tensor>& tensors, int64_t dim) { return ops::cat(tensors, dim); }

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack expects a non-empty TensorList");
  dim = wrapDim(dim, tensors[0].dim() + 1);
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].sizes() == tensors[0].sizes(),
               "stack expects each tensor to be equal size, but got ", tensors[0].shapeString(),
               " at entry 0 and ", tensors[i].shapeString(), " at entry ", i);
    expanded.push_back(ops::unsqueeze(tensors[i], dim));
  }
  return ops::cat(expanded, dim);
}

std::vector<Tensor> split(const Tensor& self, int64_t splitSize, int64_t dim) {
  KILN_CHECK(self.dim() != 0, "split expects at least a 1-dimensional tensor");
  KILN_CHECK(splitSize >= 0,
             "split expects split_size be non-negative, but got split_size=", splitSize);
  int64_t dimSize = self.size(dim);
  KILN_CHECK(splitSize > 0 || dimSize == 0,
             "split_size can only be 0 if dimension size is 0, but got dimension size of ",
             dimSize);
  int64_t count = splitSize == 0 ? 1 : std::max<int64_t>((dimSize + splitSize - 1) / splitSize, 1);
  int64_t last = splitSize - (splitSize * count - dimSize);
  std::vector<Tensor> parts;
  parts.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i)
    parts.push_back(ops::narrow(self, dim, i * splitSize, i < count - 1 ? splitSize : last));
  return parts;
}

std::vector<Tensor> splitWithSizes(const Tensor& self, IntArrayRef splitSizes, int64_t dim) {
  KILN_CHECK(self.dim() != 0, "split expects at least a 1-dimensional tensor");
  int64_t dimSize = self.size(dim);
  int64_t total = 0;
  for (int64_t s : splitSizes) {
    KILN_CHECK(
        s >= 0,
        "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=",
        shapeString(splitSizes));
    total += s;
  }
  KILN_CHECK(total == dimSize, "split_with_sizes expects split_sizes to sum exactly to ", dimSize,
             " (input tensor's size at dimension ", wrapDim(dim, self.dim()),
             "), but got split_sizes=", shapeString(splitSizes));
  std::vector<Tensor> parts;
  parts.reserve(splitSizes.size());
  int64_t start = 0;
  for (int64_t s : splitSizes) {
    parts.push_back(ops::narrow(self, dim, start, s));
    start += s;
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim) {
  KILN_CHECK(self.dim() > 0, "chunk expects at least a 1-dimensional tensor");
  KILN_CHECK(chunks > 0, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  int64_t dimSize = self.size(dim);
  int64_t splitSize = (dimSize + chunks - 1) / chunks;
  // An empty dim still yields `chunks` (empty) pieces, as PyTorch does.
  if (splitSize == 0 && dimSize == 0)
    return splitWithSizes(self, std::vector<int64_t>(size_t(chunks), 0), dim);
  return split(self, splitSize, dim);
}

std::vector<Tensor> unbind(const Tensor& self, int64_t dim) {
  dim = wrapDim(dim, self.dim());
  KILN_CHECK_INDEX(self.dim() > 0, "Dimension specified as ", dim, " but tensor has no dimensions");
  int64_t n = self.sizes()[size_t(dim)];
  std::vector<Tensor> parts;
  parts.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    parts.push_back(ops::select(self, dim, i));
  return parts;
}

} // namespace kiln::kernels
