// match-ranges: a pointwise buffer that reads a reduction's result (a softmax's normalization)
// gets the reduction's row structure as its ranges when it covers the same elements in another
// shape (e.g. [8, 32, 32] after a reshape vs rows [2, 4, 32] over [32]), so that fuse-reductions
// can put both into one loop nest. Part of `schedule`, before the fusion passes.
#pragma once
#include <string>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln::passes::loop {

// Rewrites the ranges of such pointwise buffers in place when every index of the body stays
// free of new floor-divisions and modulos; one log line per rewrite.
void matchRanges(LoopProgram& p, std::vector<std::string>& log);

} // namespace kiln::passes::loop
