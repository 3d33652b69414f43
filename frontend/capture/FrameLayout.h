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

// Prepares the frame the hook was given (pushed for the captured function, not run) to run a
// cache entry's glue instead, as _PyFrame_Initialize would for a call of `glue` with the
// frame's `numArgs` argument slots: the glue takes exactly those arguments, in the same first
// slots. Running the glue there saves pushing a second frame and then clearing and popping the
// first, and the interpreter releases the frame when the glue returns. From 3.12 only, where the
// eval function owns the frame it is given; 3.11's caller clears the frame itself afterwards.
// A glue needing more room than the function (it usually has a local and a deeper stack) grows
// the frame in place: it is the newest on the thread's data stack, so that only moves the
// stack's top, within its current chunk. False, with the frame unchanged, where the glue does not
// fit: not a plain function of exactly those positional arguments, or no room left in the chunk.
inline bool reuseForGlue(PyThreadState* tstate, _PyInterpreterFrame* f, PyObject* glue, int numArgs) {
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyFunction_Check(glue) || f->frame_obj || f->f_locals) return false;
  auto* gcode = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(glue));
  PyCodeObject* fcode = code(f);
  constexpr int kNotPlain = CO_VARARGS | CO_VARKEYWORDS | CO_GENERATOR | CO_COROUTINE |
                            CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE;
  if (gcode->co_argcount != numArgs || gcode->co_kwonlyargcount || (gcode->co_flags & kNotPlain))
    return false;
  auto** base = reinterpret_cast<PyObject**>(f);
  if (gcode->co_framesize > fcode->co_framesize) {
    if (tstate->datastack_top != base + fcode->co_framesize ||
        base + gcode->co_framesize > tstate->datastack_limit)
      return false;
    tstate->datastack_top = base + gcode->co_framesize;
  }
  // Before it runs, the frame holds its arguments and NULLs (free variables are copied in by
  // COPY_FREE_VARS when it starts); clear beyond the arguments all the same.
  for (int i = numArgs; i < f->stacktop; ++i)
    Py_CLEAR(f->localsplus[i]);
  PyObject* oldFunction = f->f_funcobj;
  PyObject* oldCode = reinterpret_cast<PyObject*>(fcode);
  Py_INCREF(glue);
  _PyFrame_Initialize(f, reinterpret_cast<PyFunctionObject*>(glue), nullptr, gcode, numArgs);
  Py_DECREF(oldFunction);
  Py_DECREF(oldCode);
  return true;
#else
  (void)tstate, (void)f, (void)glue, (void)numArgs;
  return false;
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
