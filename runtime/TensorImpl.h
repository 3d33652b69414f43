// TensorImpl: a strided view (sizes, strides, offset, dtype) of a Storage. Tensor: its handle.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/DimVector.h"
#include "runtime/Error.h"
#include "runtime/IntrusivePtr.h"
#include "runtime/Scalar.h"
#include "runtime/ScalarType.h"
#include "runtime/Storage.h"

namespace kiln {

class Tensor;
namespace autograd {
struct AutogradMeta;
void destroyAutogradMeta(AutogradMeta* m);
struct AutogradMetaDeleter {
  void operator()(AutogradMeta* m) const { destroyAutogradMeta(m); }
};
} // namespace autograd

class TensorImpl : public RefCounted {
public:
  TensorImpl(Storage storage, ScalarType dtype, DimVector sizes, DimVector strides,
             int64_t offset);

  const Storage& storage() const { return storage_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  IntArrayRef sizes() const { return sizes_; }
  IntArrayRef strides() const { return strides_; }
  int64_t storageOffset() const { return offset_; }
  int64_t numel() const { return numel_; }
  int64_t dim() const { return int64_t(sizes_.size()); }
  bool isContiguous() const { return contiguous_; }

  // Re-points this impl at new geometry (used by in-place view ops such as squeeze_).
  void setGeometry(DimVector sizes, DimVector strides, int64_t offset);

  // Set on leaves by requires_grad_ and on every output autograd recorded: the dispatcher adds
  // the Autograd key for tensors that have it.
  bool requiresGrad = false;
  // A 0-d tensor made from a Python number: it takes part in type promotion as a number would.
  bool isWrappedNumber = false;
  // Allocated under inference_mode: never saved for backward (runtime/autograd).
  bool isInference = false;
  // grad, grad_fn, hooks, view base: made on first use (runtime/autograd/AutogradMeta.h).
  std::unique_ptr<autograd::AutogradMeta, autograd::AutogradMetaDeleter> autogradMeta;

private:
  void refresh();

  Storage storage_;
  ScalarType dtype_;
  DimVector sizes_, strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 1;
  bool contiguous_ = true;
};

class Tensor {
public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A new tensor with fresh (uninitialized) memory, contiguous unless strides are given.
  static Tensor empty(IntArrayRef sizes, ScalarType dtype, Device device = Device());
  static Tensor emptyStrided(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype,
                             Device device = Device());
  // A 0-d tensor holding a Python number (marked as a wrapped number for type promotion).
  static Tensor wrapScalar(const Scalar& s);
  static Tensor scalarTensor(const Scalar& s, ScalarType dtype, Device device = Device());

  bool defined() const { return bool(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  const IntrusivePtr<TensorImpl>& implPtr() const { return impl_; }

  IntArrayRef sizes() const { return impl_->sizes(); }
  IntArrayRef strides() const { return impl_->strides(); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t dim() const { return impl_->dim(); }
  int64_t numel() const { return impl_->numel(); }
  ScalarType dtype() const { return impl_->dtype(); }
  Device device() const { return impl_->device(); }
  bool isMeta() const { return impl_->device().isMeta(); }
  bool isContiguous() const { return impl_->isContiguous(); }
  int64_t storageOffset() const { return impl_->storageOffset(); }
  const Storage& storage() const { return impl_->storage(); }
  bool requiresGrad() const { return impl_->requiresGrad; }
  bool isWrappedNumber() const { return impl_->isWrappedNumber; }

  // Address of element [0, 0, ...] (storage base + offset).
  char* rawData() const {
    return static_cast<char*>(impl_->storage()->data()) +
           impl_->storageOffset() * int64_t(elementSize(dtype()));
  }
  template <typename T> T* data() const { return reinterpret_cast<T*>(rawData()); }

  // A view of the same storage with other geometry (no checks beyond bounds).
  Tensor asStrided(IntArrayRef sizes, IntArrayRef strides, int64_t offset) const;
  // The value of a one-element tensor.
  Scalar item() const;
  // Marks an in-place write (for autograd's saved-tensor checks).
  void bumpVersion() const { impl_->storage()->bumpVersion(); }
  bool isSame(const Tensor& o) const { return impl_ == o.impl_; }

  // "[2, 3]" and "float32[2, 3]" for error messages.
  std::string shapeString() const;
  std::string describe() const;

private:
  IntrusivePtr<TensorImpl> impl_;
};

std::string shapeString(IntArrayRef sizes);
// Wraps a possibly negative dim into [0, ndim); IndexError as PyTorch words it.
int64_t wrapDim(int64_t dim, int64_t ndim);
DimVector contiguousStrides(IntArrayRef sizes);
int64_t computeNumel(IntArrayRef sizes);

} // namespace kiln
