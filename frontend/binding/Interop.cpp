// numpy <-> kiln without copies: the storage keeps the array alive and vice versa.
#include "frontend/binding/Interop.h"

#include <nanobind/ndarray.h>

#include <cstring>

#include "frontend/binding/PythonConvert.h"

namespace kiln::python {

namespace {

ScalarType dtypeFromDl(nb::dlpack::dtype dt) {
  using Code = nb::dlpack::dtype_code;
  auto code = Code(dt.code);
  if (code == Code::Bool) return ScalarType::Bool;
  if (code == Code::Float && dt.bits == 16) return ScalarType::Float16;
  if (code == Code::Float && dt.bits == 32) return ScalarType::Float32;
  if (code == Code::Float && dt.bits == 64) return ScalarType::Float64;
  if (code == Code::Bfloat && dt.bits == 16) return ScalarType::BFloat16;
  if (code == Code::Int && dt.bits == 8) return ScalarType::Int8;
  if (code == Code::Int && dt.bits == 16) return ScalarType::Int16;
  if (code == Code::Int && dt.bits == 32) return ScalarType::Int32;
  if (code == Code::Int && dt.bits == 64) return ScalarType::Int64;
  if (code == Code::UInt && dt.bits == 8) return ScalarType::UInt8;
  throw TypeError(concat("can't convert array of this dtype (code ", int(dt.code), ", ", int(dt.bits),
                         " bits); the only supported types are: float64, float32, float16, "
                         "int64, int32, int16, int8, uint8, and bool"));
}

nb::dlpack::dtype dlFromDtype(ScalarType t) {
  using Code = nb::dlpack::dtype_code;
  switch (t) {
  case ScalarType::Bool: return {uint8_t(Code::Bool), 8, 1};
  case ScalarType::UInt8: return {uint8_t(Code::UInt), 8, 1};
  case ScalarType::Int8: return {uint8_t(Code::Int), 8, 1};
  case ScalarType::Int16: return {uint8_t(Code::Int), 16, 1};
  case ScalarType::Int32: return {uint8_t(Code::Int), 32, 1};
  case ScalarType::Int64: return {uint8_t(Code::Int), 64, 1};
  case ScalarType::Float16: return {uint8_t(Code::Float), 16, 1};
  case ScalarType::BFloat16: return {uint8_t(Code::Bfloat), 16, 1};
  case ScalarType::Float32: return {uint8_t(Code::Float), 32, 1};
  case ScalarType::Float64: return {uint8_t(Code::Float), 64, 1};
  }
  return {};
}

} // namespace

Tensor tensorFromArray(nb::ndarray<nb::ro> a, nb::handle owner) {
  ScalarType dt = dtypeFromDl(a.dtype());
  DimVector sizes(a.ndim()), strides(a.ndim());
  int64_t extent = 1;
  bool empty = false;
  for (size_t d = 0; d < a.ndim(); ++d) {
    sizes[d] = int64_t(a.shape(d));
    strides[d] = int64_t(a.stride(d));
    KILN_CHECK_VALUE(strides[d] >= 0,
                     "At least one stride in the given numpy array is negative, and tensors with "
                     "negative strides are not currently supported. (You can probably work around "
                     "this by making a copy of your array with array.copy().)");
    if (sizes[d] == 0) empty = true;
    extent += (sizes[d] - 1) * strides[d];
  }
  size_t nbytes = empty ? 0 : size_t(extent) * elementSize(dt);
  PyObject* keep = owner.ptr();
  Py_INCREF(keep);
  Storage storage = StorageImpl::wrap(const_cast<void*>(a.data()), nbytes, Device(), [keep] {
    nb::gil_scoped_acquire gil;
    Py_DECREF(keep);
  });
  return Tensor(makeIntrusive<TensorImpl>(std::move(storage), dt, sizes, strides, 0));
}

void registerInterop(nb::module_& m, TensorClass& cls) {
  m.def("from_numpy", [](nb::handle obj) {
    KILN_CHECK_TYPE(std::strcmp(Py_TYPE(obj.ptr())->tp_name, "numpy.ndarray") == 0,
                    "expected np.ndarray (got ", Py_TYPE(obj.ptr())->tp_name, ")");
    auto a = nb::cast<nb::ndarray<nb::ro>>(obj);
    return nb::steal(wrapTensor(tensorFromArray(a, obj)));
  });
  cls.def("numpy", [](const Tensor& t, bool force) {
    KILN_CHECK(!t.requiresGrad() || force,
               "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
    KILN_CHECK_TYPE(t.device().isCpu(), "can't convert ", t.device().str(),
                    " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.");
    KILN_CHECK_TYPE(t.dtype() != ScalarType::BFloat16, "Got unsupported ScalarType BFloat16");
    std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
    std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
    // The capsule owns a handle on the tensor: the array keeps the memory alive.
    auto* keep = new Tensor(t);
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
    nb::ndarray<nb::numpy> arr(t.rawData(), t.dim(), shape.data(), owner, strides.data(),
                               dlFromDtype(t.dtype()));
    return arr.cast();
  }, nb::arg("force") = false);
}

} // namespace kiln::python
