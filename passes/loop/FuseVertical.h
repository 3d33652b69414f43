// fuse-vertical: a pointwise group fuses with the pointwise groups reading it (same ranges, so
// the consumer reads the element being computed from a local).
#pragma once
#include "passes/loop/FusionGroups.h"

namespace kiln::passes::loop {

void fuseVertical(FusionGroups& groups);

} // namespace kiln::passes::loop
