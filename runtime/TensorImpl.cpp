// TensorImpl geometry and Tensor basics.
#include "runtime/TensorImpl.h"

#include <cstdint>
#include <cstring>

#include "generated/Ops.h"
#include "runtime/DispatchKey.h"

namespace kiln {

TensorImpl::TensorImpl(Storage storage, ScalarType dtype, DimVector sizes, DimVector strides,
                       int64_t offset)
    : storage_(std::move(storage)), dtype_(dtype), sizes_(std::move(sizes)),
      strides_(std::move(strides)), offset_(offset) {
  refresh();
  isInference = InferenceMode::isEnabled();
}

void TensorImpl::setGeometry(DimVector sizes, DimVector strides, int64_t offset) {
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::refresh() {
  numel_ = computeNumel(sizes_);
  contiguous_ = true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) {
      contiguous_ = false;
      break;
    }
    expected *= sizes_[d];
  }
  if (numel_ == 0) contiguous_ = true;
}

int64_t computeNumel(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

DimVector contiguousStrides(IntArrayRef sizes) {
  DimVector strides(sizes.size());
  int64_t acc = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

std::string shapeString(IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

int64_t wrapDim(int64_t dim, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1); // a 0-d tensor accepts dims -1 and 0
  KILN_CHECK_INDEX(dim >= -n && dim < n, "Dimension out of range (expected to be in range of [",
                   -n, ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

Tensor Tensor::empty(IntArrayRef sizes, ScalarType dtype, Device device) {
  return emptyStrided(sizes, contiguousStrides(sizes), dtype, device);
}

Tensor Tensor::emptyStrided(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype,
                            Device device) {
  int64_t extent = 1; // elements needed: 1 + sum((size-1)*stride)
  for (size_t d = 0; d < sizes.size(); ++d) {
    KILN_CHECK(sizes[d] >= 0, "Trying to create tensor with negative dimension ", sizes[d], ": ",
               kiln::shapeString(sizes));
    if (sizes[d] == 0) extent = 0;
  }
  if (extent) {
    for (size_t d = 0; d < sizes.size(); ++d) extent += (sizes[d] - 1) * strides[d];
  }
  Storage storage = StorageImpl::allocate(size_t(extent) * elementSize(dtype), device);
  return Tensor(makeIntrusive<TensorImpl>(std::move(storage), dtype, DimVector(sizes),
                                          DimVector(strides), 0));
}

Tensor Tensor::scalarTensor(const Scalar& s, ScalarType dtype, Device device) {
  Tensor t = empty({}, dtype, device);
  if (!device.isMeta()) {
    KILN_DISPATCH_ALL(dtype, "scalar_tensor", [&]<typename scalar_t>() { *t.data<scalar_t>() = s.to<scalar_t>(); });
  }
  return t;
}

Tensor Tensor::wrapScalar(const Scalar& s) {
  Tensor t = scalarTensor(s, s.naturalType());
  t.impl()->isWrappedNumber = true;
  return t;
}

int64_t Tensor::size(int64_t d) const { return sizes()[size_t(wrapDim(d, dim()))]; }
int64_t Tensor::stride(int64_t d) const { return strides()[size_t(wrapDim(d, dim()))]; }

Tensor Tensor::asStrided(IntArrayRef sizes, IntArrayRef strides, int64_t offset) const {
  auto impl = makeIntrusive<TensorImpl>(storage(), dtype(), DimVector(sizes), DimVector(strides),
                                        offset);
  return Tensor(std::move(impl));
}

Scalar Tensor::item() const {
  KILN_CHECK(numel() == 1, "a Tensor with ", numel(),
             " elements cannot be converted to Scalar");
  KILN_CHECK(!isMeta(), "Tensor.item() cannot be called on meta tensors");
  if (device().isCuda()) return ops::_to_copy(*this, std::nullopt, Device(DeviceType::CPU)).item();
  return KILN_DISPATCH_ALL(dtype(), "item", [&]<typename scalar_t>() -> Scalar {
    scalar_t v = *data<scalar_t>();
    if constexpr (std::is_same_v<scalar_t, bool>) return Scalar(v);
    else if constexpr (std::is_integral_v<scalar_t>) return Scalar(int64_t(v));
    else return Scalar(double(v));
  });
}

std::string Tensor::shapeString() const { return kiln::shapeString(sizes()); }
std::string Tensor::describe() const {
  return std::string(scalarTypeName(dtype())) + shapeString();
}

} // namespace kiln
