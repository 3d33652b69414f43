// fuse-reductions: reductions fuse with their pointwise prologue (producers over the same rows),
// their epilogue (pointwise consumers of the rows, e.g. softmax's division) and independent
// groups reading the same data over the same rows (layer norm's mean and variance): one kernel
// per row block when the C++ code generator can emit it as one nest.
#pragma once
#include "passes/loop/FusionGroups.h"

namespace kiln::passes::loop {

void fuseReductions(FusionGroups& groups);

} // namespace kiln::passes::loop
