// The interpreter frame (PEP 523) of each CPython version kiln captures, read through a few
// accessors so that the frame hook (EvalFrame.cpp, the only file that includes this) is
// version-free. Facts from CPython's Include/internal/pycore_frame.h and Python/ceval.c:
//   3.11  f_func (a PyFunctionObject*), f_code; the caller (_PyEval_Vector) clears and pops the
//         frame after the eval function returns.
//   3.12  f_funcobj (PyObject*), f_code; the eval function clears and pops the frame it was
//         given, so one that answers without running it must do that itself.
//   3.13  f_executable (the code object), f_funcobj; _PyEval_FrameClearAndPop is exported.
// Code extras: 3.12 renamed _PyCode_GetExtra and friends to PyUnstable_* (the old names are
// deprecated, an error under -Werror).
#pragma once
#include "frontend/capture/PythonVersion.h"

#if KILN_CAPTURE_SUPPORTED

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#if PY_VERSION_HEX >= 0x030D0000
#include <internal/pycore_ceval.h>
#endif
#undef Py_BUILD_CORE

namespace kiln::capture::pyframe {

inline PyCodeObject* code(_PyInterpreterFrame* f) {
#if PY_VERSION_HEX >= 0x030D0000
  return reinterpret_cast<PyCodeObject*>(f->f_executable);
#else
  return f->f_code;
#endif
}

// The function being called; null for frames that have none (class bodies, exec).
inline PyFunctionObject* function(_PyInterpreterFrame* f) {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* fn = f->f_funcobj;
  return fn && PyFunction_Check(fn) ? reinterpret_cast<PyFunctionObject*>(fn) : nullptr;
#else
  return f->f_func;
#endif
}

inline PyObject** localsplus(_PyInterpreterFrame* f) { return f->localsplus; }
inline PyObject* globals(_PyInterpreterFrame* f) { return f->f_globals; }
inline PyObject* builtins(_PyInterpreterFrame* f) { return f->f_builtins; }
inline PyObject* localsDict(_PyInterpreterFrame* f) { return f->f_locals; }

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
// 3.12's clear_thread_frame (Python/ceval.c), whose parts are not exported: release what the
// frame holds, then pop it off the thread's data stack (_PyThreadState_PopFrame). The frame
// reaches the hook before it ever ran, so no frame object can point at it yet.
inline void clearAndPop312(PyThreadState* tstate, _PyInterpreterFrame* f) {
  if (f->frame_obj) Py_FatalError("kiln: a frame the hook did not run has a frame object");
  for (int i = 0; i < f->stacktop; ++i)
    Py_XDECREF(f->localsplus[i]);
  Py_XDECREF(f->f_locals);
  Py_DECREF(f->f_funcobj);
  Py_DECREF(f->f_code);
  auto** base = reinterpret_cast<PyObject**>(f);
  _PyStackChunk* chunk = tstate->datastack_chunk;
  if (base == &chunk->data[0]) {
    // The frame opened a new chunk: free it and go back to the previous one (never the root).
    _PyStackChunk* previous = chunk->previous;
    tstate->datastack_top = &previous->data[previous->top];
    tstate->datastack_chunk = previous;
    tstate->datastack_limit = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(previous) + previous->size);
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    arena.free(arena.ctx, chunk, chunk->size);
  } else {
    tstate->datastack_top = base;
  }
}
#endif

// Called when the hook answered a frame without running it (a cache entry's glue ran instead).
inline void discardUnrun(PyThreadState* tstate, _PyInterpreterFrame* f) {
#if PY_VERSION_HEX >= 0x030D0000
  _PyEval_FrameClearAndPop(tstate, f);
#elif PY_VERSION_HEX >= 0x030C0000
  clearAndPop312(tstate, f);
#else
  (void)tstate, (void)f; // 3.11: _PyEval_Vector clears and pops it after the hook returns
#endif
}

inline int getCodeExtra(PyObject* code, Py_ssize_t index, void** extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_GetExtra(code, index, extra);
#else
  return _PyCode_GetExtra(code, index, extra);
#endif
}

inline int setCodeExtra(PyObject* code, Py_ssize_t index, void* extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_SetExtra(code, index, extra);
#else
  return _PyCode_SetExtra(code, index, extra);
#endif
}

inline Py_ssize_t requestCodeExtraIndex(freefunc free) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Eval_RequestCodeExtraIndex(free);
#else
  return _PyEval_RequestCodeExtraIndex(free);
#endif
}

} // namespace kiln::capture::pyframe

#endif // KILN_CAPTURE_SUPPORTED
