// The PEP 523 eval-frame function. A frame reaches it pushed and initialised (arguments bound
// in localsplus) but not yet run. Answering from a cache entry runs the glue on the frame's
// slots instead and then lets pyframe::discardUnrun release the frame where the version needs it
// (3.12+: the eval function owns the frame; 3.11: its caller does). The frame's layout per
// version is in FrameLayout.h; on a Python kiln does not know, the hook is never installed.
#include "frontend/capture/EvalFrame.h"

#include "frontend/capture/FrameLayout.h"

#include <algorithm>
#include <vector>

#include "frontend/binding/PythonConvert.h"
#include "frontend/capture/GuardTreeBinding.h"
#include "runtime/Error.h"

namespace kiln::capture {

Py_ssize_t numArgSlots(PyCodeObject* code) {
  return code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
         ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

#if KILN_CAPTURE_SUPPORTED // else EvalFrameUnsupported.cpp

namespace {

struct CacheEntry {
  PyObject* guards; // the Python GuardTree (strong); keeps `tree` alive
  GuardTree* tree;
  PyObject* glue; // strong
};

// A code object's capture state, stored in its co_extra slot.
struct CodeExtra {
  bool skip = false;
  std::vector<CacheEntry> entries; // most recently used first

  ~CodeExtra() {
    for (CacheEntry& e : entries) {
      Py_DECREF(e.guards);
      Py_DECREF(e.glue);
    }
  }
};

// Per thread: the callback (strong, null for none) and the root code (borrowed).
thread_local PyObject* tCallback = nullptr;
thread_local PyObject* tRootCode = nullptr;

// Globals below are guarded by the GIL.
int gThreadsWithCallback = 0;
_PyFrameEvalFunction gPreviousEval = nullptr;
Py_ssize_t gExtraIndex = -1;
// The interpreter that imported kiln (the hook is per interpreter). Kept rather than read from
// the thread state on every switch: from 3.12 CPython keeps the thread state in a thread-local,
// which a shared libpython reads through __tls_get_addr, and a compiled call switches the hook
// four times (issue 17: about a tenth of a cache hit's overhead on 3.12 and 3.13).
PyInterpreterState* gInterp = nullptr;
PyObject* gSkipMarker = nullptr;
std::vector<PyObject*> gCodesWithExtra; // strong references, so reset() can find every extra

void freeCodeExtra(void* p) { delete static_cast<CodeExtra*>(p); }

CodeExtra* codeExtra(PyCodeObject* code) {
  void* p = nullptr;
  if (pyframe::getCodeExtra(reinterpret_cast<PyObject*>(code), gExtraIndex, &p) < 0) {
    PyErr_Clear();
    return nullptr;
  }
  return static_cast<CodeExtra*>(p);
}

// The code's extra state, created on first use; null with an error set on failure.
CodeExtra* ensureCodeExtra(PyCodeObject* code) {
  if (CodeExtra* e = codeExtra(code)) return e;
  auto* e = new CodeExtra();
  PyObject* o = reinterpret_cast<PyObject*>(code);
  if (pyframe::setCodeExtra(o, gExtraIndex, e) < 0) {
    delete e;
    return nullptr;
  }
  Py_INCREF(o);
  gCodesWithExtra.push_back(o);
  return e;
}

PyObject* evalFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwFlag);

void setHookInstalled(bool on) {
  PyInterpreterState* interp = gInterp;
  if (on) {
    gPreviousEval = _PyInterpreterState_GetEvalFrameFunc(interp);
    _PyInterpreterState_SetEvalFrameFunc(interp, evalFrame);
  } else {
    // Setting the default back clears the interpreter's slot, so 3.11 inlines Python calls again.
    _PyInterpreterState_SetEvalFrameFunc(interp,
                                         gPreviousEval ? gPreviousEval : _PyEval_EvalFrameDefault);
  }
}

// Runs the frame's own bytecode; `ran` tells evalFrame that the frame is CPython's to release.
PyObject* runFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwFlag, bool& ran) {
  ran = true;
  return _PyEval_EvalFrameDefault(tstate, frame, throwFlag);
}

// Runs `glue(*bound arguments)` in place of the frame, with capture off for this thread.
PyObject* callGlue(_PyInterpreterFrame* frame, PyObject* glue) {
  Py_INCREF(glue);
  PyObject* saved = exchangeCallback(nullptr);
  // The frame owns its slots and outlives this call (the caller pops it after we return).
  PyObject* result =
      PyObject_Vectorcall(glue, pyframe::localsplus(frame), size_t(numArgSlots(pyframe::code(frame))), nullptr);
  restoreCallback(saved);
  Py_DECREF(glue);
  return result;
}

// Runs a cache entry's glue in place of the frame: in the frame itself where the version allows
// (pyframe::reuseForGlue; then CPython releases the frame as for any run: `ran`), else as a call.
PyObject* runGlue(PyThreadState* tstate, _PyInterpreterFrame* frame, PyObject* glue, bool& ran) {
  if (!pyframe::reuseForGlue(tstate, frame, glue, int(numArgSlots(pyframe::code(frame)))))
    return callGlue(frame, glue);
  // The frame holds the glue now, so a reset() while it runs cannot free it.
  PyObject* saved = exchangeCallback(nullptr);
  PyObject* result = runFrame(tstate, frame, 0, ran);
  restoreCallback(saved);
  return result;
}

PyObject* makeFrameInfo(_PyInterpreterFrame* frame, CodeExtra* extra, const FrameView& view) {
  // Failures first: building Python objects may run the collector (and so finalizers that could
  // reset the caches and free `extra`).
  std::vector<std::string> failures;
  if (extra) {
    for (const CacheEntry& e : extra->entries) {
      failures.emplace_back();
      e.tree->check(view, &failures.back());
    }
  }
  PyCodeObject* code = pyframe::code(frame);
  PyObject** slots = pyframe::localsplus(frame);
  Py_ssize_t n = numArgSlots(code);
  FrameInfo info;
  PyObject* args = PyTuple_New(n);
  if (!args) return nullptr;
  info.args = nb::steal(args);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = slots[i] ? slots[i] : Py_None;
    Py_INCREF(v);
    PyTuple_SET_ITEM(args, i, v);
  }
  info.code = nb::borrow(reinterpret_cast<PyObject*>(code));
  info.func = nb::borrow(reinterpret_cast<PyObject*>(pyframe::function(frame)));
  info.globals = nb::borrow(pyframe::globals(frame));
  info.builtins = nb::borrow(pyframe::builtins(frame));
  info.isRoot = reinterpret_cast<PyObject*>(code) == tRootCode;
  info.numEntries = int(failures.size());
  for (const std::string& f : failures)
    info.failures.append(nb::str(f.c_str(), f.size()));
  return nb::cast(std::move(info)).release().ptr();
}

// Installs the callback's (guards, glue) answer as the code's most recent entry.
bool addEntry(PyCodeObject* code, PyObject* answer) {
  PyObject* guards = PyTuple_GET_ITEM(answer, 0);
  PyObject* glue = PyTuple_GET_ITEM(answer, 1);
  GuardTree* tree = guardTreeFromObject(guards);
  if (!tree || !PyCallable_Check(glue)) {
    PyErr_Format(PyExc_TypeError, "capture callback: expected (GuardTree, callable), got (%s, %s)",
                 Py_TYPE(guards)->tp_name, Py_TYPE(glue)->tp_name);
    return false;
  }
  if (tree->numLocals() > code->co_nlocalsplus) {
    PyErr_Format(PyExc_ValueError,
                 "capture callback: the guards read local %d but %U has %d local slots",
                 tree->numLocals() - 1, code->co_qualname, code->co_nlocalsplus);
    return false;
  }
  CodeExtra* extra = ensureCodeExtra(code);
  if (!extra) return false;
  Py_INCREF(guards);
  Py_INCREF(glue);
  extra->entries.insert(extra->entries.begin(), CacheEntry{guards, tree, glue});
  return true;
}

// A cache miss: ask the callback (capture off) and act on its answer.
PyObject* onMiss(PyThreadState* tstate, _PyInterpreterFrame* frame, CodeExtra* extra,
                 const FrameView& view, bool& ran) {
  PyObject* info;
  try {
    info = makeFrameInfo(frame, extra, view);
  } catch (...) {
    python::setPythonErrorFromException(nullptr);
    return nullptr;
  }
  if (!info) return nullptr;
  PyObject* callback = exchangeCallback(nullptr);
  PyObject* answer = PyObject_CallOneArg(callback, info);
  restoreCallback(callback);
  Py_DECREF(info);
  if (!answer) return nullptr;
  // `extra` may be gone (the callback can call reset()): look the code's state up again.
  PyCodeObject* code = pyframe::code(frame);
  if (answer == Py_None) {
    Py_DECREF(answer);
    return runFrame(tstate, frame, 0, ran);
  }
  if (answer == gSkipMarker) {
    Py_DECREF(answer);
    CodeExtra* e = ensureCodeExtra(code);
    if (!e) return nullptr;
    e->skip = true;
    return runFrame(tstate, frame, 0, ran);
  }
  if (!PyTuple_CheckExact(answer) || PyTuple_GET_SIZE(answer) != 2) {
    PyErr_Format(PyExc_TypeError,
                 "capture callback must return None, SKIP or (GuardTree, glue), not %s",
                 Py_TYPE(answer)->tp_name);
    Py_DECREF(answer);
    return nullptr;
  }
  bool ok = addEntry(code, answer);
  PyObject* glue = PyTuple_GET_ITEM(answer, 1);
  PyObject* result = ok ? runGlue(tstate, frame, glue, ran) : nullptr;
  Py_DECREF(answer);
  return result;
}

// The cache lookup: runs the frame (setting `ran`), or answers with a glue in its place.
PyObject* answerFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwFlag, bool& ran) {
  PyCodeObject* code = pyframe::code(frame);
  PyFunctionObject* func = pyframe::function(frame);
  // Generators and coroutines (their first eval only builds the generator), resumed frames, and
  // frames with a locals dict (class bodies, exec) are not captured.
  constexpr int kNotCaptured =
      CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE;
  if (!tCallback || throwFlag || (code->co_flags & kNotCaptured) || pyframe::localsDict(frame) ||
      !func)
    return runFrame(tstate, frame, throwFlag, ran);
  CodeExtra* extra = codeExtra(code);
  if (extra && extra->skip) return runFrame(tstate, frame, 0, ran);
  FrameView view{pyframe::localsplus(frame), pyframe::globals(frame), pyframe::builtins(frame),
                 func->func_closure};
  if (extra) {
    // Guard checks run no Python code, so the entry list cannot change during this loop.
    auto& entries = extra->entries;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!entries[i].tree->check(view)) continue;
      std::rotate(entries.begin(), entries.begin() + Py_ssize_t(i),
                  entries.begin() + Py_ssize_t(i) + 1);
      return runGlue(tstate, frame, entries.front().glue, ran);
    }
  }
  return onMiss(tstate, frame, extra, view, ran);
}

PyObject* evalFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwFlag) {
  bool ran = false;
  PyObject* result = answerFrame(tstate, frame, throwFlag, ran);
  if (!ran) pyframe::discardUnrun(tstate, frame);
  return result;
}

} // namespace

void initEvalFrame() {
  gInterp = PyInterpreterState_Get();
  gExtraIndex = pyframe::requestCodeExtraIndex(freeCodeExtra);
  if (gExtraIndex < 0) throw nb::python_error();
}

PyObject* exchangeCallback(PyObject* callback) {
  PyObject* previous = tCallback;
  Py_XINCREF(callback);
  tCallback = callback;
  int delta = (callback != nullptr) - (previous != nullptr);
  gThreadsWithCallback += delta;
  if (delta > 0 && gThreadsWithCallback == 1) setHookInstalled(true);
  if (delta < 0 && gThreadsWithCallback == 0) setHookInstalled(false);
  return previous;
}

void restoreCallback(PyObject* previous) {
  PyObject* current = exchangeCallback(previous);
  Py_XDECREF(previous);
  Py_XDECREF(current);
}

PyObject* exchangeRootCode(PyObject* code) {
  PyObject* previous = tRootCode;
  tRootCode = code;
  return previous;
}

bool hookInstalled() {
  return _PyInterpreterState_GetEvalFrameFunc(PyThreadState_Get()->interp) == evalFrame;
}

void setSkipMarker(PyObject* marker) { gSkipMarker = marker; }

void markSkipped(PyObject* code) {
  KILN_CHECK_TYPE(PyCode_Check(code), "skip_code: expected a code object");
  CodeExtra* e = ensureCodeExtra(reinterpret_cast<PyCodeObject*>(code));
  if (!e) throw nb::python_error();
  e->skip = true;
}

void resetCaches() {
  // Freeing an extra drops glue functions, whose finalizers may run code that adds new extras.
  std::vector<PyObject*> codes;
  codes.swap(gCodesWithExtra);
  for (PyObject* code : codes) {
    if (pyframe::setCodeExtra(code, gExtraIndex, nullptr) < 0) PyErr_Clear();
    Py_DECREF(code);
  }
}

nb::list cacheEntries(PyObject* code) {
  KILN_CHECK_TYPE(PyCode_Check(code), "cache_entries: expected a code object");
  // Take references before allocating anything (see makeFrameInfo).
  std::vector<std::pair<nb::object, nb::object>> entries;
  if (CodeExtra* e = codeExtra(reinterpret_cast<PyCodeObject*>(code))) {
    entries.reserve(e->entries.size());
    for (const CacheEntry& entry : e->entries)
      entries.emplace_back(nb::borrow(entry.guards), nb::borrow(entry.glue));
  }
  nb::list out;
  for (auto& [guards, glue] : entries)
    out.append(nb::make_tuple(guards, glue));
  return out;
}

#endif // KILN_CAPTURE_SUPPORTED

} // namespace kiln::capture
