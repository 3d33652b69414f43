// fuse-horizontal: independent pointwise groups over the same ranges that read a common input or
// buffer share one loop nest.
#pragma once
#include "passes/loop/FusionGroups.h"

namespace kiln::passes::loop {

void fuseHorizontal(FusionGroups& groups);

} // namespace kiln::passes::loop
