// A process-wide counter that changes whenever a Graph may have freed one of its nodes (an
// erase, a graph destroyed or move-assigned): a holder of a Node* that checked the node was live
// at generation g need not look it up again while the counter still reads g (the Python node
// handles, frontend/binding/FxBinding.cpp, check liveness on every attribute read).
#pragma once
#include <cstdint>

namespace kiln {

// Starts at 1 (0 never names a generation).
uint64_t nodeFreeGeneration();

} // namespace kiln
