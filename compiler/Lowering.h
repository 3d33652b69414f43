// Lowering: a prims graph (static shapes) -> a LoopProgram. Each prim becomes a "loader" (an
// index vector -> a loop-body value) so elementwise chains and views fuse into their consumer;
// reductions, mm/bmm (extern kernels), graph outputs and large shared values are realized.
#pragma once
#include "ir/Graph.h"
#include "ir/loop/LoopIR.h"

namespace kiln::compiler {

// Lowers a graph whose call_function nodes are all prims ("prims.*") and whose nodes carry
// static tensor types (as after kiln.fx.retrace / decompose-prims). Throws kiln::Error naming
// the prim for one it cannot lower (random and creation prims other than full/iota, copy_to,
// cat, as_strided, empty_strided) and for dynamic shapes.
LoopProgram lowerToLoops(const Graph& primsGraph);

} // namespace kiln::compiler
