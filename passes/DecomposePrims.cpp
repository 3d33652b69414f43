// Decomposition to Prims: a retrace at the Prims level.
#include "passes/DecomposePrims.h"

#include "compiler/GraphTracer.h"

namespace kiln {

void decomposeToPrims(Graph& g) { g = compiler::retrace(g, compiler::DecomposeTo::Prims); }

} // namespace kiln
