// Decomposition to Prims ("decompose-prims"): retraces the graph (compiler/GraphTracer.h) so that
// every op that is not a prim and has a decomposition is replaced by the ops of its
// decomposition, recursively: non-core ops through Core ATen down to prims, with type promotion
// and broadcasting explicit. Ops without a decomposition stay. Every node gets its meta type;
// placeholders and get_attr nodes need tensor types with static sizes.
#pragma once
#include "ir/Graph.h"

namespace kiln {

void decomposeToPrims(Graph& g);

} // namespace kiln
