// The vectorcall op object: parse -> dispatch -> wrap, with errors mapped to Python.
#include "frontend/binding/OpFunction.h"

#include <stdexcept>
#include <structmember.h>

#include <map>
#include <mutex>

#include "frontend/binding/PythonConvert.h"
#include "runtime/Dispatcher.h"
#include "runtime/Warning.h"

namespace kiln::python {

namespace {

struct OpFunctionObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  OverloadGroup* group;
};

PyObject* callOp(OpFunctionObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  OverloadGroup* g = self->group;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  try {
    PyObject* selfTensor = nullptr;
    if (g->isMethod()) {
      if (nargs < 1 || !isTensor(args[0])) {
        PyErr_Format(PyExc_TypeError, "descriptor '%s' requires a 'kiln.Tensor' object",
                     g->name().c_str());
        return nullptr;
      }
      selfTensor = args[0];
      ++args;
      --nargs;
    }
    bool sparse = false;
    PyObject* sparseResult = callSparseHandler(g->name().c_str(), selfTensor, args, nargs, kwnames, sparse);
    if (sparse) return sparseResult;
    ParsedCall call = g->parse(selfTensor, args, nargs, kwnames);
    Dispatcher::instance().call(call.op, call.stack);
    if (hasWarnings())
      for (const std::string& w : takeWarnings())
        if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) < 0) return nullptr;
    if (call.requiresGrad) {
      for (Value& v : call.stack) {
        if (!v.isTensor()) continue;
        KILN_CHECK(isDifferentiableType(v.toTensor().dtype()),
                   "Only Tensors of floating point and complex dtype can require gradients");
        v.toTensor().impl()->requiresGrad = true;
      }
    }
    return returnsToPython(call);
  } catch (...) {
    setPythonErrorFromException(g->name().c_str());
    return nullptr;
  }
}

PyObject* opFunctionGet(PyObject* self, PyObject* obj, PyObject* type) {
  OpFunctionObject* f = reinterpret_cast<OpFunctionObject*>(self);
  if (obj == nullptr || obj == Py_None || !f->group->isMethod()) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

PyObject* opFunctionRepr(PyObject* self) {
  auto* f = reinterpret_cast<OpFunctionObject*>(self);
  return PyUnicode_FromFormat("<kiln op %s>", f->group->name().c_str());
}

PyObject* opFunctionDoc(PyObject* self, void*) {
  auto* f = reinterpret_cast<OpFunctionObject*>(self);
  return PyUnicode_FromString(f->group->signatures().c_str());
}

PyObject* opFunctionName(PyObject* self, void*) {
  auto* f = reinterpret_cast<OpFunctionObject*>(self);
  return PyUnicode_FromString(f->group->name().c_str());
}

PyGetSetDef opFunctionGetSet[] = {
    {"__doc__", opFunctionDoc, nullptr, nullptr, nullptr},
    {"__name__", opFunctionName, nullptr, nullptr, nullptr},
    {"__qualname__", opFunctionName, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMemberDef opFunctionMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(OpFunctionObject, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

void opFunctionDealloc(PyObject* self) {
  delete reinterpret_cast<OpFunctionObject*>(self)->group;
  Py_TYPE(self)->tp_free(self);
}

PyTypeObject OpFunctionType = [] {
  PyTypeObject t{};
  Py_SET_REFCNT(&t, 1);
  t.tp_name = "kiln._C._OpFunction";
  t.tp_basicsize = sizeof(OpFunctionObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_vectorcall_offset = offsetof(OpFunctionObject, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_descr_get = opFunctionGet;
  t.tp_repr = opFunctionRepr;
  t.tp_getset = opFunctionGetSet;
  t.tp_members = opFunctionMembers;
  t.tp_dealloc = opFunctionDealloc;
  return t;
}();

PyObject* valueToPython(Value& v) {
  if (v.isTensor()) return wrapTensor(std::move(v.toTensor()));
  if (v.isTensorList()) {
    const auto& list = v.toTensorList();
    PyObject* tup = PyTuple_New(Py_ssize_t(list.size()));
    for (size_t i = 0; i < list.size(); ++i) PyTuple_SET_ITEM(tup, Py_ssize_t(i), wrapTensor(list[i]));
    return tup;
  }
  if (v.isBool()) return PyBool_FromLong(v.toBool());
  if (v.isInt()) return PyLong_FromLongLong(v.toInt());
  if (v.isDouble()) return PyFloat_FromDouble(v.toDouble());
  if (v.isScalar()) {
    Scalar s = v.toScalar();
    if (s.isBool()) return PyBool_FromLong(s.toBool());
    if (s.isIntegral()) return PyLong_FromLongLong(s.toInt());
    return PyFloat_FromDouble(s.toDouble());
  }
  Py_RETURN_NONE;
}

// Named returns (values, indices) become a struct sequence like torch.return_types.max.
PyTypeObject* namedReturnType(const OpSchema& s) {
  static std::map<std::string, PyTypeObject*> cache;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(s.name);
  if (it != cache.end()) return it->second;
  auto* fields = new PyStructSequence_Field[s.returns.size() + 1];
  for (size_t i = 0; i < s.returns.size(); ++i) fields[i] = {strdup(s.returns[i].name.c_str()), nullptr};
  fields[s.returns.size()] = {nullptr, nullptr};
  auto* desc = new PyStructSequence_Desc{strdup(("kiln.return_types." + s.name).c_str()), nullptr,
                                         fields, int(s.returns.size())};
  PyTypeObject* type = PyStructSequence_NewType(desc);
  cache[s.name] = type;
  return type;
}

} // namespace

PyObject* returnsToPython(const ParsedCall& call) {
  const OpSchema& s = Dispatcher::instance().schema(call.op);
  auto& stack = const_cast<Stack&>(call.stack);
  if (s.returns.empty()) Py_RETURN_NONE;
  if (s.returns.size() == 1) {
    const ReturnSpec& r = s.returns[0];
    // An in-place op returns the very object it was called on (x.add_(1) is x).
    if (r.aliasOf >= 0 && s.args[size_t(r.aliasOf)].mutated && call.argObjects[size_t(r.aliasOf)]) {
      PyObject* o = call.argObjects[size_t(r.aliasOf)];
      Py_INCREF(o);
      return o;
    }
    // An op that returns its input unchanged returns the same object (x.to(x.dtype) is x).
    if (r.aliasOf >= 0 && stack[0].isTensor() && call.argObjects[size_t(r.aliasOf)]) {
      PyObject* o = call.argObjects[size_t(r.aliasOf)];
      if (isTensor(o) && unwrapTensor(o).isSame(stack[0].toTensor())) {
        Py_INCREF(o);
        return o;
      }
    }
    return valueToPython(stack[0]);
  }
  bool named = !s.returns[0].name.empty();
  PyObject* tup = named ? PyStructSequence_New(namedReturnType(s)) : PyTuple_New(Py_ssize_t(s.returns.size()));
  if (!tup) return nullptr;
  for (size_t i = 0; i < s.returns.size(); ++i) {
    PyObject* item = valueToPython(stack[i]);
    if (named) PyStructSequence_SET_ITEM(tup, Py_ssize_t(i), item);
    else PyTuple_SET_ITEM(tup, Py_ssize_t(i), item);
  }
  return tup;
}

PyObject* makeOpFunction(std::unique_ptr<OverloadGroup> group) {
  auto* f = PyObject_New(OpFunctionObject, &OpFunctionType);
  if (!f) return nullptr;
  f->vectorcall = reinterpret_cast<vectorcallfunc>(callOp);
  f->group = group.release();
  return reinterpret_cast<PyObject*>(f);
}

void registerOpFunctionType(PyObject* module) {
  if (PyType_Ready(&OpFunctionType) < 0) throw std::runtime_error("cannot ready _OpFunction");
  Py_INCREF(&OpFunctionType);
  PyModule_AddObject(module, "_OpFunction", reinterpret_cast<PyObject*>(&OpFunctionType));
}

} // namespace kiln::python
