// CompiledFunction: the C++ callable kiln.compile returns. Its call costs two callback swaps on
// top of calling fn, so a cache hit stays cheap.
#include "frontend/capture/CompiledFunction.h"

#include <structmember.h>

#include <stdexcept>

#include "frontend/capture/EvalFrame.h"

namespace kiln::capture {

namespace {

struct CompiledFunctionObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fn;
  PyObject* callback; // null: capture off inside (kiln.compiler.disable)
  PyObject* rootCode; // fn's code object, or null when fn is not a Python function
  PyObject* dict;
  PyObject* weakrefs;
};

CompiledFunctionObject* self(PyObject* o) { return reinterpret_cast<CompiledFunctionObject*>(o); }

PyObject* compiledCall(PyObject* o, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  CompiledFunctionObject* f = self(o);
  PyObject* savedCallback = exchangeCallback(f->callback);
  PyObject* savedRoot = exchangeRootCode(f->rootCode);
  PyObject* result = PyObject_Vectorcall(f->fn, args, nargsf, kwnames);
  exchangeRootCode(savedRoot);
  restoreCallback(savedCallback);
  return result;
}

// The code the hook reports as `is_root`: a function's, or a bound method's function's.
PyObject* rootCodeOf(PyObject* fn) {
  if (PyMethod_Check(fn)) fn = PyMethod_GET_FUNCTION(fn);
  if (!PyFunction_Check(fn)) return nullptr;
  PyObject* code = PyFunction_GET_CODE(fn);
  Py_INCREF(code);
  return code;
}

PyObject* compiledNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"fn", "callback", nullptr};
  PyObject *fn, *callback;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:CompiledFunction", const_cast<char**>(names), &fn, &callback))
    return nullptr;
  if (!PyCallable_Check(fn) || (callback != Py_None && !PyCallable_Check(callback))) {
    PyErr_SetString(PyExc_TypeError, "CompiledFunction(fn, callback): fn must be callable, callback callable or None");
    return nullptr;
  }
  PyObject* o = type->tp_alloc(type, 0);
  if (!o) return nullptr;
  CompiledFunctionObject* f = self(o);
  f->vectorcall = compiledCall;
  Py_INCREF(fn);
  f->fn = fn;
  f->callback = callback == Py_None ? nullptr : (Py_INCREF(callback), callback);
  f->rootCode = rootCodeOf(fn);
  // __name__, __qualname__, __doc__, __module__, __wrapped__ and fn's __dict__, as functools.wraps.
  PyObject* functools = PyImport_ImportModule("functools");
  PyObject* done = functools ? PyObject_CallMethod(functools, "update_wrapper", "OO", o, fn) : nullptr;
  Py_XDECREF(functools);
  if (!done) {
    Py_DECREF(o);
    return nullptr;
  }
  Py_DECREF(done);
  return o;
}

int compiledTraverse(PyObject* o, visitproc visit, void* arg) {
  CompiledFunctionObject* f = self(o);
  Py_VISIT(f->fn);
  Py_VISIT(f->callback);
  Py_VISIT(f->rootCode);
  Py_VISIT(f->dict);
  return 0;
}

int compiledClear(PyObject* o) {
  CompiledFunctionObject* f = self(o);
  Py_CLEAR(f->fn);
  Py_CLEAR(f->callback);
  Py_CLEAR(f->rootCode);
  Py_CLEAR(f->dict);
  return 0;
}

void compiledDealloc(PyObject* o) {
  PyObject_GC_UnTrack(o);
  if (self(o)->weakrefs) PyObject_ClearWeakRefs(o);
  compiledClear(o);
  Py_TYPE(o)->tp_free(o);
}

PyObject* compiledGet(PyObject* o, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(o);
    return o;
  }
  return PyMethod_New(o, obj);
}

PyObject* compiledRepr(PyObject* o) {
  CompiledFunctionObject* f = self(o);
  if (!f->fn) return PyUnicode_FromString("<CompiledFunction (cleared)>");
  return PyUnicode_FromFormat("<CompiledFunction %R%s>", f->fn, f->callback ? "" : " (capture disabled)");
}

PyObject* compiledCallback(PyObject* o, void*) {
  PyObject* cb = self(o)->callback;
  return Py_NewRef(cb ? cb : Py_None);
}

PyGetSetDef compiledGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {"_callback", compiledCallback, nullptr, "the capture callback set around calls (None: disabled)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMemberDef compiledMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(CompiledFunctionObject, vectorcall), READONLY, nullptr},
    {"_fn", T_OBJECT, offsetof(CompiledFunctionObject, fn), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyTypeObject CompiledFunctionType = [] {
  PyTypeObject t{};
  Py_SET_REFCNT(&t, 1);
  t.tp_name = "kiln._C._capture.CompiledFunction";
  t.tp_doc = "CompiledFunction(fn, callback): calls fn with the thread's capture callback set to callback";
  t.tp_basicsize = sizeof(CompiledFunctionObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_vectorcall_offset = offsetof(CompiledFunctionObject, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_new = compiledNew;
  t.tp_traverse = compiledTraverse;
  t.tp_clear = compiledClear;
  t.tp_dealloc = compiledDealloc;
  t.tp_descr_get = compiledGet;
  t.tp_repr = compiledRepr;
  t.tp_getset = compiledGetSet;
  t.tp_members = compiledMembers;
  t.tp_dictoffset = offsetof(CompiledFunctionObject, dict);
  t.tp_weaklistoffset = offsetof(CompiledFunctionObject, weakrefs);
  return t;
}();

} // namespace

void registerCompiledFunction(PyObject* module) {
  if (PyType_Ready(&CompiledFunctionType) < 0) throw std::runtime_error("cannot ready CompiledFunction");
  Py_INCREF(&CompiledFunctionType);
  PyModule_AddObject(module, "CompiledFunction", reinterpret_cast<PyObject*>(&CompiledFunctionType));
}

} // namespace kiln::capture
