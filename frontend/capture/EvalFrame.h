// The PEP 523 frame hook: a per-thread capture callback, per-code caches of (guards, glue)
// entries and SKIP marks in co_extra, and the FrameInfo a callback gets on a cache miss.
#pragma once
#include <Python.h>
#include <nanobind/nanobind.h>

namespace kiln::capture {

namespace nb = nanobind;

// What the callback sees of a frame that missed the cache (before its first instruction ran).
struct FrameInfo {
  nb::object code, func, args, globals, builtins; // args: tuple of the bound argument slots
  bool isRoot = false;                             // code is the running CompiledFunction's own
  int numEntries = 0;                              // cache entries on this code
  nb::list failures;                               // per entry, the guard that failed
};

// Requests the co_extra slot; call once when the module loads.
void initEvalFrame();

// Sets the calling thread's callback (borrowed; null for none) and returns the previous one (a
// new reference, or null). The eval function is installed while any thread has a callback.
PyObject* exchangeCallback(PyObject* callback);
// Puts back a callback exchangeCallback returned (consumes that reference).
void restoreCallback(PyObject* previous);
// The calling thread's root code (borrowed; the CompiledFunction running keeps it alive).
PyObject* exchangeRootCode(PyObject* code);
bool hookInstalled();

// The object a callback returns to mark a code skipped.
void setSkipMarker(PyObject* marker);
// Marks a code object skipped until reset (the hook then runs it at once).
void markSkipped(PyObject* code);
// Drops every cache entry and SKIP mark.
void resetCaches();
// [(guards, glue), ...] most recently used first.
nb::list cacheEntries(PyObject* code);

// The number of leading frame slots that hold the bound arguments.
Py_ssize_t numArgSlots(PyCodeObject* code);

} // namespace kiln::capture
