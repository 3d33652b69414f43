// kiln.tensor's data parsing (as torch/csrc/utils/tensor_new.cpp does it: infer the dtype over
// every element, take the shape from the first element of each level, then store every element
// with a checked conversion) and Tensor.tolist.
#include "frontend/binding/TensorData.h"

#include <cstdint>
#include <nanobind/stl/string.h>

#include <cstring>

#include "compiler/OpRecorder.h"
#include "frontend/binding/Interop.h"
#include "frontend/binding/PythonConvert.h"
#include "generated/Ops.h"
#include "runtime/DefaultDtype.h"
#include "runtime/CheckedConvert.h"

namespace kiln::python {

namespace {

constexpr size_t kMaxDims = 64;

bool isNumpyArray(PyObject* o) { return std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") == 0; }

bool isNumpyScalar(PyObject* o) {
  return std::strncmp(Py_TYPE(o)->tp_name, "numpy.", 6) == 0 && !isNumpyArray(o);
}

bool isText(PyObject* o) { return PyUnicode_Check(o) || PyBytes_Check(o); }

// The dtype of a numpy array or scalar; TypeError for the numpy types kiln lacks.
ScalarType numpyDtypeOf(PyObject* o) {
  nb::object dt = nb::borrow(o).attr("dtype");
  std::string name = nb::cast<std::string>(dt.attr("name"));
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (name == scalarTypeName(ScalarType(i))) return ScalarType(i);
  throw TypeError(strCat("can't convert np.ndarray of type numpy.", name,
                         ". The only supported types are: float64, float32, float16, int64, "
                         "int32, int16, int8, uint8, and bool."));
}

// PyTorch's infer_scalar_type: Python floats give the default dtype (float32 unless set), ints int64,
// bools bool; numpy values and tensors their own dtype; sequences the promotion of their items.
ScalarType inferDtype(PyObject* o, size_t depth) {
  if (isTensor(o)) return unwrapTensor(o).dtype();
  if (isNumpyArray(o) || isNumpyScalar(o)) return numpyDtypeOf(o);
  if (PyBool_Check(o)) return ScalarType::Bool;
  if (PyLong_Check(o)) return ScalarType::Int64;
  if (PyFloat_Check(o)) return defaultFloatType();
  KILN_CHECK_TYPE(!PyComplex_Check(o),
                  "complex numbers: kiln.tensor makes complex tensors in Python (kiln/_complex.py)");
  KILN_CHECK_VALUE(!isText(o) && depth < kMaxDims, "too many dimensions '", Py_TYPE(o)->tp_name,
                   "'");
  KILN_CHECK(PySequence_Check(o), "Could not infer dtype of ", Py_TYPE(o)->tp_name);
  nb::object seq = nb::steal(PySequence_Fast(o, "not a sequence"));
  if (!seq.is_valid()) throw nb::python_error();
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
  if (n == 0) return defaultFloatType();
  PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
  ScalarType result = ScalarType::Bool;
  for (Py_ssize_t i = 0; i < n; ++i) {
    KILN_CHECK_TYPE(items[i] != o, "new(): self-referential lists are incompatible");
    ScalarType t = inferDtype(items[i], depth + 1);
    result = i == 0 ? t : promoteTypes(result, t);
  }
  return result;
}

// The shape: the length of each level along the first elements (tensors are scalars here).
DimVector computeSizes(PyObject* data) {
  DimVector sizes;
  nb::object holder = nb::borrow(data);
  PyObject* o = data;
  while (!isTensor(o) && PySequence_Check(o)) {
    KILN_CHECK_VALUE(!isText(o) && sizes.size() < kMaxDims, "too many dimensions '",
                     Py_TYPE(o)->tp_name, "'");
    Py_ssize_t n = PySequence_Size(o);
    if (n < 0) throw nb::python_error();
    sizes.push_back(int64_t(n));
    if (n == 0) break;
    holder = nb::steal(PySequence_GetItem(o, 0));
    if (!holder.is_valid()) throw nb::python_error();
    o = holder.ptr();
  }
  return sizes;
}

[[noreturn]] void throwPython() { throw nb::python_error(); }

// One element of a tensor used inside the data: it must hold exactly one value.
Scalar scalarOfTensor(const Tensor& t, ScalarType target) {
  if (t.numel() != 1) {
    KILN_CHECK_TYPE(!isIntegralType(target, false),
                    "only integer tensors of a single element can be converted to an index");
    throw ValueError("only one element tensors can be converted to Python scalars");
  }
  return t.item();
}

// Stores one Python number into *out (PyTorch's store_scalar): floats unchecked, integers with
// an overflow check, bools by truth value.
template <typename T> void storeScalar(T* out, PyObject* o) {
  constexpr ScalarType kType = ScalarTypeOf<T>::value;
  if (isTensor(o)) {
    Scalar s = scalarOfTensor(unwrapTensor(o), kType);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      *out = checkedConvert<T>(s);
    else
      *out = s.to<T>();
    return;
  }
  if constexpr (std::is_same_v<T, bool>) {
    KILN_CHECK_TYPE(PyNumber_Check(o), "must be real number, not ", Py_TYPE(o)->tp_name);
    int truth = PyObject_IsTrue(o);
    if (truth < 0) throwPython();
    *out = truth != 0;
  } else if constexpr (std::is_integral_v<T>) {
    // Python floats are truncated (Python 3.10 no longer does that for ints, PyTorch still does).
    bool floating = PyFloat_Check(o) || (isNumpyScalar(o) && isFloatingType(numpyDtypeOf(o)));
    if (floating) {
      double d = PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) throwPython();
      *out = checkedConvert<T>(Scalar(d));
      return;
    }
    nb::object index = nb::steal(PyNumber_Index(o));
    if (!index.is_valid()) throwPython();
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (v == -1 && PyErr_Occurred()) throwPython();
    KILN_CHECK_VALUE(!overflow, "Overflow when unpacking long long");
    *out = checkedConvert<T>(Scalar(int64_t(v)));
  } else {
    double d = PyFloat_CheckExact(o) ? PyFloat_AS_DOUBLE(o) : PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) throwPython();
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      *out = T(float(d));
    else
      *out = static_cast<T>(d);
  }
}

// Walks the data row-major, checking every level's length against the shape.
template <typename T> void storeRecursive(PyObject* o, IntArrayRef sizes, size_t dim, T*& cursor) {
  if (dim == sizes.size()) {
    storeScalar<T>(cursor++, o);
    return;
  }
  nb::object seq = nb::steal(PySequence_Fast(o, "not a sequence"));
  if (!seq.is_valid()) throwPython();
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
  KILN_CHECK_VALUE(n == sizes[dim], "expected sequence of length ", sizes[dim], " at dim ", dim,
                   " (got ", n, ")");
  PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
  for (Py_ssize_t i = 0; i < n; ++i)
    storeRecursive<T>(items[i], sizes, dim + 1, cursor);
}

std::optional<ScalarType> dtypeArgument(nb::handle dtype) {
  PyObject* o = dtype.ptr();
  if (o == Py_None) return std::nullopt;
  if (isDtypeObject(o)) return dtypeFromObject(o);
  if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) return ScalarType::Float64;
  if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) return ScalarType::Int64;
  if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) return ScalarType::Bool;
  throw TypeError(
      strCat("tensor(): argument 'dtype' must be kiln.dtype, not ", Py_TYPE(o)->tp_name));
}

// Python object for the element at p (bool, int or float, as Tensor.item gives them).
template <typename T> PyObject* elementToPython(const char* p) {
  T v = *reinterpret_cast<const T*>(p);
  if constexpr (std::is_same_v<T, bool>)
    return PyBool_FromLong(v);
  else if constexpr (std::is_integral_v<T>)
    return PyLong_FromLongLong(static_cast<long long>(v));
  else
    return PyFloat_FromDouble(static_cast<double>(static_cast<opmath_t<T>>(v)));
}

using ElementToPython = PyObject* (*)(const char*);

PyObject* listRecursive(const Tensor& t, size_t dim, const char* p, ElementToPython convert) {
  if (dim == size_t(t.dim())) return convert(p);
  int64_t n = t.sizes()[dim];
  int64_t step = t.strides()[dim] * int64_t(elementSize(t.dtype()));
  PyObject* list = PyList_New(Py_ssize_t(n));
  if (!list) throwPython();
  for (int64_t i = 0; i < n; ++i) {
    PyObject* item = listRecursive(t, dim + 1, p + i * step, convert);
    if (!item) {
      Py_DECREF(list);
      throwPython();
    }
    PyList_SET_ITEM(list, Py_ssize_t(i), item);
  }
  return list;
}

} // namespace

Tensor tensorFromData(PyObject* data, std::optional<ScalarType> dtype) {
  if (isTensor(data)) {
    const Tensor& t = unwrapTensor(data);
    return ops::_to_copy(t, dtype.value_or(t.dtype()), t.device());
  }
  KILN_CHECK_TYPE(!isText(data), "new(): invalid data type '", Py_TYPE(data)->tp_name, "'");
  if (isNumpyArray(data)) {
    numpyDtypeOf(data); // the clear TypeError for unsupported dtypes
    // A view first (negative strides raise there, as in PyTorch), then kiln's own copy.
    Tensor view = tensorFromArray(nb::cast<nb::ndarray<nb::ro>>(nb::handle(data)), data);
    return ops::_to_copy(view, dtype.value_or(view.dtype()), std::nullopt);
  }
  ScalarType dt = dtype ? *dtype : inferDtype(data, 0);
  DimVector sizes = computeSizes(data);
  Tensor out = Tensor::empty(sizes, dt);
  KILN_DISPATCH_ALL(dt, "tensor", [&]<typename scalar_t>() {
    scalar_t* cursor = out.data<scalar_t>();
    storeRecursive<scalar_t>(data, sizes, 0, cursor);
  });
  return out;
}

void registerTensorData(nb::module_& m, TensorClass& cls) {
  m.def(
      "_tensor_from_data",
      [](nb::handle data, nb::handle dtype) {
        return nb::steal(wrapTensor(tensorFromData(data.ptr(), dtypeArgument(dtype))));
      },
      nb::arg("data").none(), nb::arg("dtype").none() = nb::none());
  cls.def("tolist", [](const Tensor& fakeOrReal) {
    const Tensor self = compiler::OpRecorder::readable(fakeOrReal);
    if (self.isMeta()) throw NotImplementedError("Cannot copy out of meta tensor; no data!");
    // A CUDA tensor's values are read from a host copy.
    Tensor t = self.device().isCuda() ? ops::_to_copy(self, std::nullopt, Device(DeviceType::CPU))
                                      : self;
    ElementToPython convert = KILN_DISPATCH_ALL(t.dtype(), "tolist", [&]<typename scalar_t>() {
      return ElementToPython(&elementToPython<scalar_t>);
    });
    return nb::steal(listRecursive(t, 0, t.rawData(), convert));
  });
}

} // namespace kiln::python
