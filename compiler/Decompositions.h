// The decomposition table: for each op of the table, the boxed function that computes it in
// other ops through the dispatcher (tracing it records those ops instead). Generated from the
// op table (tools/gen_ops.py: `decompose:`, composite kernels, in-place ops via their
// functional twin); the decompositions themselves live in compiler/decompositions/.
#pragma once
#include "generated/OpId.h"
#include "runtime/Value.h"

namespace kiln::compiler {

// Runs a decomposition on a stack laid out as for Dispatcher::call; leaves the op's returns.
using BoxedDecomposition = void (*)(Stack&);

// The op's decomposition, or null when it has none.
BoxedDecomposition decompositionOf(OpId op);

} // namespace kiln::compiler
