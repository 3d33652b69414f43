// kiln._C._capture.trace_frame: the symbolic interpreter's Python entry point.
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::capture {

// Adds trace_frame to the kiln._C._capture submodule.
void registerTraceFrame(nanobind::module_& m);

} // namespace kiln::capture
