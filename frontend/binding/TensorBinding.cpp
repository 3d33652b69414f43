// Tensor properties and the methods that are not ops of the table (metadata, item, flags).
#include "frontend/binding/TensorBinding.h"

#include <cstdint>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "compiler/OpRecorder.h"
#include "frontend/binding/PythonConvert.h"

namespace kiln::python {

namespace {
PyObject* gSizeClass = nullptr;

nb::object sizeOrDim(IntArrayRef values, int64_t ndim, std::optional<int64_t> dim) {
  if (dim) return nb::int_(values[size_t(wrapDim(*dim, ndim))]);
  return nb::steal(makeSize(values));
}

// Tensor.stride(): a plain tuple, as torch's (only sizes are a Size), or one dim's stride.
nb::object strideOrDim(IntArrayRef strides, int64_t ndim, std::optional<int64_t> dim) {
  if (dim) return nb::int_(strides[size_t(wrapDim(*dim, ndim))]);
  nb::list items;
  for (int64_t s : strides) items.append(nb::int_(s));
  return nb::tuple(items);
}
} // namespace

PyObject* makeSize(IntArrayRef sizes) {
  PyTypeObject* type = gSizeClass ? reinterpret_cast<PyTypeObject*>(gSizeClass) : &PyTuple_Type;
  PyObject* t = type->tp_alloc(type, Py_ssize_t(sizes.size()));
  for (size_t i = 0; i < sizes.size(); ++i) PyTuple_SET_ITEM(t, Py_ssize_t(i), PyLong_FromLongLong(sizes[i]));
  return t;
}

TensorClass registerTensor(nb::module_& m) {
  TensorClass cls(m, "TensorBase", nb::dynamic_attr());
  cls.def("__init__",
          [](Tensor* self, const Tensor& other) {
            // A new tensor object over the same data (nn.Parameter(t) must not flip t's flags).
            new (self) Tensor(other.asStrided(other.sizes(), other.strides(), other.storageOffset()));
          })
      .def_prop_ro("shape", [](const Tensor& t) { return nb::steal(makeSize(t.sizes())); })
      .def("size", [](const Tensor& t, std::optional<int64_t> dim) { return sizeOrDim(t.sizes(), t.dim(), dim); },
           nb::arg("dim") = nb::none())
      .def("stride",
           [](const Tensor& t, std::optional<int64_t> dim) { return strideOrDim(t.strides(), t.dim(), dim); },
           nb::arg("dim") = nb::none())
      .def_prop_ro("dtype", [](const Tensor& t) { return nb::borrow(dtypeObject(t.dtype())); })
      .def_prop_ro("device", [](const Tensor& t) { return nb::steal(deviceObject(t.device())); })
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("ndimension", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("nelement", &Tensor::numel)
      .def("element_size", [](const Tensor& t) { return elementSize(t.dtype()); })
      .def_prop_ro("itemsize", [](const Tensor& t) { return elementSize(t.dtype()); })
      .def_prop_ro("nbytes", [](const Tensor& t) { return int64_t(elementSize(t.dtype())) * t.numel(); })
      .def("is_contiguous", [](const Tensor& t) { return t.isContiguous(); })
      .def("storage_offset", &Tensor::storageOffset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.rawData()); })
      .def("is_floating_point", [](const Tensor& t) { return isFloatingType(t.dtype()); })
      .def("is_complex", [](const Tensor&) { return false; })
      .def_prop_ro("is_meta", [](const Tensor& t) { return t.isMeta(); })
      .def_prop_ro("is_cpu", [](const Tensor& t) { return t.device().isCpu(); })
      .def_prop_ro("is_cuda", [](const Tensor& t) { return t.device().isCuda(); })
      .def_prop_ro("_version", [](const Tensor& t) { return t.storage()->version(); })
      .def("_is_same", [](const Tensor& a, const Tensor& b) { return a.isSame(b); })
      .def("_storage_id", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.storage().get()); })
      .def("item", [](const Tensor& t) -> nb::object {
        // A parameter or buffer the traced graph reads, read into Python by kiln's library code
        // running on fakes (BatchNorm's momentum=None: 1 / float(num_batches_tracked)): its
        // value now would be a constant of the graph, wrong on the next call. A break instead.
        const compiler::OpRecorder* recorder = compiler::OpRecorder::current();
        if (recorder && !t.isMeta() && recorder->isLifted(t)) {
          PyErr_SetString(PyExc_NotImplementedError,
                          "item() of a parameter or buffer the graph reads (its value is data-dependent)");
          throw nb::python_error();
        }
        Scalar s = compiler::OpRecorder::readable(t).item();
        if (s.isBool()) return nb::bool_(s.toBool());
        if (s.isIntegral()) return nb::int_(s.toInt());
        return nb::float_(s.toDouble());
      });
  m.def("_set_size_class", [](nb::handle cls) {
    Py_XINCREF(cls.ptr());
    gSizeClass = cls.ptr();
  });
  m.def("_set_tensor_class", [](nb::handle cls) { setTensorClass(cls.ptr()); });
  m.def("_set_sparse_tensor_class",
        [](nb::handle cls, nb::handle handler) { setSparseTensorClass(cls.ptr(), handler.ptr()); });
  return cls;
}

} // namespace kiln::python
