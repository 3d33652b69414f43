// kiln._C's CUDA functions behind kiln.cuda (frontend/python/kiln/cuda.py): driver state,
// devices, streams, events and the caching allocator's stats.
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

void registerCuda(nanobind::module_& m);

} // namespace kiln::python
