// Decomposition to Core ATen ("decompose-core-aten"): retraces the graph (compiler/GraphTracer.h)
// so that every op that is neither core nor a prim and has a decomposition is replaced by the
// ops of its decomposition, recursively (ops without one stay). Every node gets its meta type;
// placeholders and get_attr nodes need tensor types with static sizes.
#pragma once
#include "ir/Graph.h"

namespace kiln {

void decomposeToCoreAten(Graph& g);

} // namespace kiln
