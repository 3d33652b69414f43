// dtype and device objects, tensor wrapping, number conversion, exception mapping.
#include "frontend/binding/PythonConvert.h"

#include <cstdint>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstring>

#include "runtime/DefaultDtype.h"
#include "runtime/Error.h"

namespace kiln::python {

namespace {

struct DtypeBox {
  ScalarType type;
};

PyObject* gDtypes[kNumScalarTypes] = {};
PyObject* gTensorClass = nullptr; // kiln.Tensor (a Python subclass of TensorBase)

} // namespace

PyObject* dtypeObject(ScalarType t) { return gDtypes[int(t)]; }

bool isDtypeObject(PyObject* o) { return nb::isinstance<DtypeBox>(nb::handle(o)); }

ScalarType dtypeFromObject(PyObject* o) { return nb::cast<DtypeBox&>(nb::handle(o)).type; }

void registerDtypes(nb::module_& m) {
  nb::class_<DtypeBox>(m, "dtype")
      .def_prop_ro("is_floating_point", [](DtypeBox& d) { return isFloatingType(d.type); })
      .def_prop_ro("is_signed", [](DtypeBox& d) { return isSignedType(d.type); })
      .def_prop_ro("is_complex", [](DtypeBox& d) { return isComplexType(d.type); })
      .def_prop_ro("itemsize", [](DtypeBox& d) { return elementSize(d.type); })
      .def("__repr__", [](DtypeBox& d) { return std::string("kiln.") + scalarTypeName(d.type); })
      .def("__reduce__", [](DtypeBox& d) { return std::string(scalarTypeName(d.type)); });
  for (int i = 0; i < kNumScalarTypes; ++i) {
    nb::object o = nb::cast(DtypeBox{ScalarType(i)});
    gDtypes[i] = o.release().ptr();
    m.attr(scalarTypeName(ScalarType(i))) = nb::handle(gDtypes[i]);
  }
}

// kiln.device
namespace {
struct DeviceBox {
  Device d;
};
} // namespace

std::optional<Device> gDefaultDevice; // kiln.set_default_device / `with kiln.device(...)`
std::vector<std::optional<Device>> gDefaultDeviceStack; // the defaults entered `with` blocks replaced

void registerDevice(nb::module_& m) {
  nb::class_<DeviceBox>(m, "device")
      .def("__init__",
           [](DeviceBox* self, const std::string& spec, std::optional<int> index) {
             Device d = Device::parse(spec);
             if (index) {
               KILN_CHECK(d.index < 0, "type (string) must not include an index because index was passed explicitly: ", spec);
               KILN_CHECK(*index >= 0, "Device index must not be negative");
               d.index = int8_t(*index);
             }
             new (self) DeviceBox{d};
           },
           nb::arg("type"), nb::arg("index") = nb::none())
      // kiln.device(other_device) is a copy; kiln.device(0) is cuda:0, as in PyTorch.
      .def("__init__", [](DeviceBox* self, const DeviceBox& other) { new (self) DeviceBox{other.d}; },
           nb::arg("type"))
      .def("__init__",
           [](DeviceBox* self, int index) {
             KILN_CHECK(index >= 0, "Device index must not be negative");
             new (self) DeviceBox{Device(DeviceType::CUDA, int8_t(index))};
           },
           nb::arg("type"))
      .def_prop_ro("type",
                   [](DeviceBox& b) {
                     return std::string(b.d.isCpu() ? "cpu" : b.d.isMeta() ? "meta" : "cuda");
                   })
      .def_prop_ro("index", [](DeviceBox& b) -> std::optional<int> {
        if (b.d.index < 0) return std::nullopt;
        return int(b.d.index);
      })
      .def("__str__", [](DeviceBox& b) { return b.d.str(); })
      .def("__repr__", [](DeviceBox& b) {
        std::string s = "device(type='" + Device(b.d.type).str() + "'";
        if (b.d.index >= 0) s += ", index=" + std::to_string(b.d.index);
        return s + ")";
      })
      .def("__eq__", [](DeviceBox& a, nb::handle other) {
        Device d;
        return toDevice(other.ptr(), d) && d == a.d;
      })
      .def("__hash__", [](DeviceBox& b) { return int(b.d.type) * 1000 + b.d.index; })
      // pickle (and multiprocessing) rebuild a device from its string, as torch.device does.
      .def("__reduce__", [](nb::handle self) {
        return nb::make_tuple(self.type(), nb::make_tuple(nb::cast<DeviceBox&>(self).d.str()));
      })
      // `with kiln.device("meta"):` makes it the factories' default device inside the block.
      .def("__enter__",
           [](nb::handle self) {
             gDefaultDeviceStack.push_back(gDefaultDevice);
             setDefaultDevice(nb::cast<DeviceBox&>(self).d);
             return self;
           })
      .def("__exit__", [](DeviceBox&, nb::args) {
        KILN_CHECK(!gDefaultDeviceStack.empty(), "kiln.device.__exit__ without __enter__");
        gDefaultDevice = gDefaultDeviceStack.back();
        gDefaultDeviceStack.pop_back();
        return false;
      });
  m.def("_set_default_device", [](nb::handle d) {
    if (d.is_none()) return setDefaultDevice(std::nullopt);
    Device dev;
    KILN_CHECK_TYPE(toDevice(d.ptr(), dev), "set_default_device(): expected a device, a string or None, got ",
                    Py_TYPE(d.ptr())->tp_name);
    setDefaultDevice(dev);
  }, nb::arg("device").none());
  m.def("_get_default_device", [] { return nb::steal(deviceObject(gDefaultDevice.value_or(Device()))); });
  // kiln.set_default_dtype / get_default_dtype (the checks are in kiln/_settings.py).
  m.def("_set_default_dtype", [](nb::handle d) {
    KILN_CHECK_TYPE(isDtypeObject(d.ptr()), "set_default_dtype(): expected a dtype, got ", Py_TYPE(d.ptr())->tp_name);
    ScalarType t = dtypeFromObject(d.ptr());
    KILN_CHECK_TYPE(isFloatingType(t), "only floating-point types are supported as the default type");
    setDefaultFloatType(t);
  });
  m.def("_get_default_dtype", [] { return nb::borrow(dtypeObject(defaultFloatType())); });
}

bool toDevice(PyObject* o, Device& out) {
  if (PyUnicode_Check(o)) {
    out = Device::parse(PyUnicode_AsUTF8(o));
    return true;
  }
  if (nb::isinstance<DeviceBox>(nb::handle(o))) {
    out = nb::cast<DeviceBox&>(nb::handle(o)).d;
    return true;
  }
  if (isPyInt(o)) {
    out = Device(DeviceType::CUDA, int8_t(PyLong_AsLong(o)));
    return true;
  }
  return false;
}

PyObject* deviceObject(Device d) { return nb::cast(DeviceBox{d}).release().ptr(); }

std::optional<Device> defaultDevice() { return gDefaultDevice; }

void setDefaultDevice(std::optional<Device> d) {
  // The CPU is what factories make without a default: no default is kept for it, so that the
  // common case costs nothing.
  gDefaultDevice = d && !d->isCpu() ? d : std::nullopt;
}

bool isTensor(PyObject* o) { return nb::isinstance<Tensor>(nb::handle(o)); }

Tensor& unwrapTensor(PyObject* o) { return *nb::inst_ptr<Tensor>(nb::handle(o)); }

void setTensorClass(PyObject* cls) {
  Py_XINCREF(cls);
  gTensorClass = cls;
}

namespace {
PyTypeObject* gSparseTensorClass = nullptr;
PyObject* gSparseHandler = nullptr;

bool holdsSparse(PyObject* o) {
  if (Py_TYPE(o) == gSparseTensorClass) return true;
  if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (Py_TYPE(items[i]) == gSparseTensorClass) return true;
  return false;
}
} // namespace

void setSparseTensorClass(PyObject* cls, PyObject* handler) {
  Py_XINCREF(cls);
  Py_XINCREF(handler);
  gSparseTensorClass = reinterpret_cast<PyTypeObject*>(cls);
  gSparseHandler = handler;
}

bool isSparseTensor(PyObject* o) { return gSparseTensorClass && Py_TYPE(o) == gSparseTensorClass; }

bool holdsSparseTensor(PyObject* o) { return gSparseTensorClass && holdsSparse(o); }

PyObject* callSparseHandler(const char* name, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                            PyObject* kwnames, bool& handled) {
  handled = false;
  if (!gSparseTensorClass) return nullptr;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  bool any = self && holdsSparse(self);
  for (Py_ssize_t i = 0; i < nargs + nkw && !any; ++i) any = holdsSparse(args[i]);
  if (!any) return nullptr;
  handled = true;
  // handler(name, args, kwargs): args with self first.
  nb::list positional;
  if (self) positional.append(nb::handle(self));
  for (Py_ssize_t i = 0; i < nargs; ++i) positional.append(nb::handle(args[i]));
  nb::dict kwargs;
  for (Py_ssize_t i = 0; i < nkw; ++i) kwargs[nb::handle(PyTuple_GET_ITEM(kwnames, i))] = nb::handle(args[nargs + i]);
  return PyObject_CallFunctionObjArgs(gSparseHandler, nb::str(name).ptr(), nb::tuple(positional).ptr(),
                                      kwargs.ptr(), nullptr);
}

PyObject* wrapTensor(Tensor t) {
  if (!t.defined()) Py_RETURN_NONE;
  nb::handle cls = gTensorClass ? nb::handle(gTensorClass) : nb::type<Tensor>();
  nb::object inst = nb::inst_alloc(cls);
  new (nb::inst_ptr<Tensor>(inst)) Tensor(std::move(t));
  nb::inst_mark_ready(inst);
  return inst.release().ptr();
}

bool isNumberLike(PyObject* o) {
  if (PyFloat_Check(o) || PyLong_Check(o)) return true;
  // numpy scalars (numpy.float32(1.5), numpy.int64(3)), but not arrays.
  const char* name = Py_TYPE(o)->tp_name;
  return std::strncmp(name, "numpy.", 6) == 0 && std::strcmp(name, "numpy.ndarray") != 0;
}

Scalar toScalarFromNumber(PyObject* o) {
  if (PyBool_Check(o)) return Scalar(o == Py_True);
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) throw Error("value cannot be converted to type int64 without overflow");
    return Scalar(int64_t(v));
  }
  if (PyFloat_Check(o)) return Scalar(PyFloat_AsDouble(o));
  // numpy scalar: go through .item()
  nb::object item = nb::steal(PyObject_CallMethod(o, "item", nullptr));
  if (!item.is_valid()) throw nb::python_error();
  return toScalarFromNumber(item.ptr());
}

namespace {
PyObject* linAlgErrorType = nullptr;
} // namespace

void registerLinAlgError(nb::module_& m) {
  linAlgErrorType = PyErr_NewExceptionWithDoc(
      "kiln._C.LinAlgError",
      "A matrix that cannot be factorized (singular, not positive-definite): torch.linalg.LinAlgError.",
      PyExc_RuntimeError, nullptr);
  if (!linAlgErrorType) throw nb::python_error();
  m.attr("LinAlgError") = nb::borrow(linAlgErrorType);
}

void setPythonErrorFromException(const char* opName) {
  auto msg = [&](const std::exception& e) {
    std::string m = e.what();
    if (opName && m.rfind(opName, 0) != 0) m = std::string(opName) + "(): " + m;
    return m;
  };
  try {
    throw;
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const IndexError& e) {
    PyErr_SetString(PyExc_IndexError, msg(e).c_str());
  } catch (const TypeError& e) {
    PyErr_SetString(PyExc_TypeError, msg(e).c_str());
  } catch (const ValueError& e) {
    PyErr_SetString(PyExc_ValueError, msg(e).c_str());
  } catch (const NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, msg(e).c_str());
  } catch (const LinAlgError& e) {
    // The message names the user's function (linalg.inv), not the op behind it (linalg_inv_ex).
    PyErr_SetString(linAlgErrorType ? linAlgErrorType : PyExc_RuntimeError, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_SetString(PyExc_MemoryError, "kiln: out of memory");
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, msg(e).c_str());
  } catch (...) {
    // Nothing may unwind through CPython's frames (the caller may be Python code run for real
    // while tracing): an exception of another type leaves the interpreter's frame chain
    // dangling, and the next Python C API call crashes.
    PyErr_SetString(PyExc_RuntimeError, (std::string(opName ? opName : "kiln") +
                                         "(): an unexpected C++ exception (not a std::exception)").c_str());
  }
}

} // namespace kiln::python
