// kiln._C._OpFunction: a Python callable for one op name (all its overloads). It is a method
// descriptor too, so Tensor.add and Tensor.__add__ call it with self and no bound-method object.
#pragma once
#include <Python.h>

#include <memory>

#include "frontend/binding/PythonArgParser.h"

namespace kiln::python {

// A new function object (a new reference) calling the overload group.
PyObject* makeOpFunction(std::unique_ptr<OverloadGroup> group);
void registerOpFunctionType(PyObject* module);
// Converts an op's returns to Python (tuple for several, named when the schema names them).
PyObject* returnsToPython(const ParsedCall& call);

} // namespace kiln::python
