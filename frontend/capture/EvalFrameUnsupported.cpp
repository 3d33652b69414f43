// The frame hook's API on a CPython that kiln does not know yet (PythonVersion.h): its
// interpreter frame may have changed, so the hook is never installed and every frame runs as
// CPython runs it. kiln.compile warns once and runs functions eagerly (compiler/hook.py).
#include "frontend/capture/EvalFrame.h"

#include "frontend/capture/PythonVersion.h"
#include "runtime/Error.h"

#if !KILN_CAPTURE_SUPPORTED

namespace kiln::capture {

namespace {
thread_local PyObject* tCallback = nullptr; // kept so that set_callback round-trips
thread_local PyObject* tRootCode = nullptr;
} // namespace

void initEvalFrame() {}

PyObject* exchangeCallback(PyObject* callback) {
  PyObject* previous = tCallback;
  Py_XINCREF(callback);
  tCallback = callback;
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

bool hookInstalled() { return false; }
void setSkipMarker(PyObject*) {}

void markSkipped(PyObject* code) {
  KILN_CHECK_TYPE(PyCode_Check(code), "skip_code: expected a code object");
}

void resetCaches() {}

nb::list cacheEntries(PyObject* code) {
  KILN_CHECK_TYPE(PyCode_Check(code), "cache_entries: expected a code object");
  return nb::list();
}

} // namespace kiln::capture

#endif // !KILN_CAPTURE_SUPPORTED
