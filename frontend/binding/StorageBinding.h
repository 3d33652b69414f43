// Raw storage access for kiln.save / kiln.load (frontend/python/kiln/serialization.py): a
// tensor's whole storage as bytes, and a fresh 1-D tensor over a copy of saved bytes.
#pragma once
#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace kiln::python {

// kiln._C._storage_nbytes(t), _storage_bytes(t), _tensor_from_bytes(data, dtype).
void registerStorage(nb::module_& m);

} // namespace kiln::python
