// kiln._C._capture.GuardTree: the Python face of a GuardTree, with a small builder (g.local(0,
// "L['x']").check_tensor(x)) whose node objects keep their tree alive.
#pragma once
#include <nanobind/nanobind.h>

#include <memory>

#include "frontend/capture/GuardTree.h"

namespace kiln::capture {

namespace nb = nanobind;

void registerGuardTree(nb::module_& m);
// The tree inside a Python GuardTree, or null when `o` is not one.
GuardTree* guardTreeFromObject(PyObject* o);
// A Python GuardTree owning `tree` (how a tracer hands its guards to Python).
nb::object wrapGuardTree(std::shared_ptr<GuardTree> tree);

} // namespace kiln::capture
