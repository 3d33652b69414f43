// Decomposition to Core ATen: a retrace at the CoreAten level.
#include "passes/DecomposeCoreAten.h"

#include "compiler/GraphTracer.h"

namespace kiln {

void decomposeToCoreAten(Graph& g) { g = compiler::retrace(g, compiler::DecomposeTo::CoreAten); }

} // namespace kiln
