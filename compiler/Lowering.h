// Lowering: a prims graph (static shapes) -> a LoopProgram. Each prim becomes a "loader" (an
// index vector -> a loop-body value) so elementwise chains and views fuse into their consumer;
// reductions, mm/bmm (extern kernels), graph outputs and large shared values are realized.
#pragma once
#include "ir/Graph.h"
#include "ir/loop/LoopIR.h"

namespace kiln::compiler {

// Lowers a graph whose call_function nodes are all prims ("prims.*") and whose nodes carry
// static tensor types (as after kiln.fx.retrace / decompose-prims). copy_to (in place) becomes
// a buffer written into its destination's storage (docs/loop-ir.md). Throws kiln::Error naming
// the prim for one it cannot lower (random and creation prims other than full/iota, cat,
// as_strided, empty_strided), for dynamic shapes and for a write into overlapping elements.
LoopProgram lowerToLoops(const Graph& primsGraph);

} // namespace kiln::compiler
