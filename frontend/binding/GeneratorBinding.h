// kiln.Generator (the type of kiln.default_generator) and the module's seeding functions:
// manual_seed, seed, initial_seed, get_rng_state, set_rng_state.
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

void registerGenerator(nanobind::module_& m);

} // namespace kiln::python
