// GraphTracer: make_fx over a graph. `retrace` runs a graph's ops on fake tensors under an
// OpRecorder and returns the graph the recorder built: the same computation with every node's
// meta type filled in and, at a decomposition level, every op outside that level's op set
// replaced by the ops its decomposition calls (recursively).
//
//  - placeholders and get_attr nodes keep their names, targets and meta; their fakes are meta
//    tensors of their types (static sizes required);
//  - call_function nodes of ops of the table ("aten.*", and call_method / "kiln.X" calls that
//    resolve to an overload) are called through the dispatcher with their arguments (schema
//    defaults for the rest; Python numbers for Tensor parameters become wrapped numbers);
//  - operator.getitem of a multi-output op's result picks the element;
//  - kiln._C._set_grad_enabled nodes are copied as they are (tracing does not depend on them);
//  - the output node returns the nodes now standing for the old outputs.
// Locations (NodeMeta::loc) carry over to every node made for a node. Anything else (call_module,
// other callables, number-typed inputs) raises.
#pragma once
#include "compiler/OpRecorder.h"
#include "ir/Graph.h"

namespace kiln::compiler {

Graph retrace(const Graph& g, DecomposeTo level);

} // namespace kiln::compiler
