// kiln._C._capture.CompiledFunction(fn, callback): a vectorcall wrapper that sets the calling
// thread's capture callback around each call of fn (restoring the previous one on every exit).
// It is a descriptor (decorates methods), has a __dict__ (functools.update_wrapper works) and
// __wrapped__.
#pragma once
#include <Python.h>

namespace kiln::capture {

// Readies the type and adds it to `module` as CompiledFunction.
void registerCompiledFunction(PyObject* module);

} // namespace kiln::capture
