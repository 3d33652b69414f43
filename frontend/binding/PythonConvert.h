// Conversions between Python objects and kiln values: dtypes, devices, tensors, scalars.
#pragma once
#include <Python.h>
#include <nanobind/nanobind.h>

#include "runtime/Value.h"

namespace kiln::python {

namespace nb = nanobind;

// The singleton kiln.<dtype> objects (kiln.float32 is kiln.float32).
PyObject* dtypeObject(ScalarType t);
bool isDtypeObject(PyObject* o);
ScalarType dtypeFromObject(PyObject* o);
void registerDtypes(nb::module_& m);

// kiln.device
void registerDevice(nb::module_& m);
bool toDevice(PyObject* o, Device& out); // str, kiln.device or int (cuda index)
PyObject* deviceObject(Device d);
// The device factories (kiln.zeros, kiln.randn, ... : creation ops without tensor arguments) use
// when they are given none: kiln.set_default_device, `with kiln.device(...)`. nullopt: the CPU.
std::optional<Device> defaultDevice();
void setDefaultDevice(std::optional<Device> d);

// Tensor <-> Python
bool isTensor(PyObject* o);
Tensor& unwrapTensor(PyObject* o);
PyObject* wrapTensor(Tensor t);
// Sets the Python class that op results are instances of (kiln.Tensor).
void setTensorClass(PyObject* cls);

// Sparse COO tensors (kiln.sparse): a Python class over a meta placeholder of the tensor's shape
// and dtype. No C++ kernel sees one: an op called with one goes to the Python handler
// (kiln/sparse/_dispatch.py), which runs the ops kiln has for sparse or raises torch's error.
void setSparseTensorClass(PyObject* cls, PyObject* handler);
bool isSparseTensor(PyObject* o);
// o is a sparse tensor, or a tuple or list holding one.
bool holdsSparseTensor(PyObject* o);
// The sparse handler's result for op `name` called with these Python arguments (self first for
// a method), or null when none of them is a sparse tensor. Null with a Python error set: it raised.
PyObject* callSparseHandler(const char* name, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                            PyObject* kwnames, bool& handled);

// Python number checks (bool is not an int here, as in PyTorch's parser).
inline bool isPyInt(PyObject* o) { return PyLong_Check(o) && !PyBool_Check(o); }
bool isNumberLike(PyObject* o); // bool, int, float, or a numpy scalar
Scalar toScalarFromNumber(PyObject* o);

// Sets the Python error for the C++ exception being handled (call inside catch (...)).
void setPythonErrorFromException(const char* opName);
// kiln._C.LinAlgError (a RuntimeError subclass; kiln.linalg.LinAlgError), made by
// registerLinAlgError: what a kiln::LinAlgError becomes.
void registerLinAlgError(nb::module_& m);

} // namespace kiln::python
