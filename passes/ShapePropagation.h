// Shape propagation ("shape-prop"): fills every node's meta type (dtype, sizes, strides when
// not contiguous, device) by running the graph on meta tensors through the dispatcher, the way
// FX's ShapeProp runs it on fake tensors.
//
//  - placeholders and get_attr nodes must carry a type with static sizes: they become
//    Tensor::empty / emptyStrided meta tensors (tuple types become tuples of them);
//  - calls of ops of the table ("aten.*", and call_method / "kiln.X" / "torch.X" calls that
//    resolve to an overload) run the op's meta kernel (or its composite) via
//    Dispatcher::call with a Stack built from the node's arguments and the schema's defaults;
//    Python numbers passed for Tensor parameters become wrapped-number tensors; Device
//    arguments are replaced by the meta device while computing and kept for the result type;
//  - operator.getitem of a tuple-typed value by a constant index picks the element;
//  - anything else (call_module, other callables) keeps its annotated type, and is an error
//    without one.
//
// The result's device is the Device argument when one is given, else the first tensor
// input's. Errors (missing meta kernel, a kernel rejecting the shapes, symbolic sizes, which
// this pass does not handle yet) are IRErrors located at the node.
#pragma once
#include "ir/Graph.h"

namespace kiln {

void propagateShapes(Graph& g);
// The same for one node, from the types its inputs carry (a pass typing the nodes it makes).
void propagateShape(Node& n);

} // namespace kiln
