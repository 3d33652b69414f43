// kiln._C._capture: the frame hook's Python surface (set_callback, CompiledFunction, FrameInfo,
// SKIP, GuardTree, reset, cache_entries).
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::capture {

void registerCapture(nanobind::module_& m);

} // namespace kiln::capture
