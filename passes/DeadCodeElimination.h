// Dead-code elimination ("dce").
//
// Removes every node whose value nobody uses and whose removal cannot change what the program
// does, walking from the output backwards so whole dead chains go in one run.
//
// Kept even when unused (ir/Effects.h decides):
//  - placeholders (they are the graph's signature) and the output node;
//  - ops that mutate an argument (schema "Tensor(a!)", e.g. aten.add_.Tensor, aten.copy_) or
//    draw random numbers (tag random);
//  - call_module (its code is unknown) and call_method / call_function targets that are not
//    known to be pure (in-place names ending in "_", names the op table does not know, other
//    than size/dim/numel/stride and the pure operator.* / math.* callables).
//
// get_attr nodes and pure calls are removed. Never reorders nodes.
#pragma once
#include "ir/Graph.h"

namespace kiln {

void eliminateDeadCode(Graph& g);

} // namespace kiln
