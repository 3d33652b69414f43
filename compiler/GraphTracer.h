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
//  - aot.input_value(input, value) (joint trace only): `value`, differentiated as `input` (see
//    aot.py: an input written under no_grad keeps its autograd history);
//  - call_function nodes of an external target (registerExternalTarget: Python code, a custom
//    autograd.Function's application) run that code on the fakes, which records the ops it
//    calls; except a plain retrace at level None, which keeps such a node as it is (its result
//    typed by its getitems' meta), so that AOT's joint trace still meets it after the ATen-level
//    retrace and functionalization;
//  - the output node returns the nodes now standing for the old outputs.
// Locations (NodeMeta::loc) carry over to every node made for a node. Anything else (call_module,
// other callables, number-typed inputs) raises.
#pragma once
#include <functional>

#include "compiler/OpRecorder.h"
#include "ir/Graph.h"

namespace kiln::compiler {

// The code behind an external call_function target: given the node's arguments' values (fake
// tensors, or Python-free constants: ints, floats, bools, strings), it calls ops on the fakes
// under the tracer's recorder (OpRecorder::tracesCustomFunctions is on) and returns the node's
// results, a tuple of tensors (the node's getitems pick them).
using ExternalTarget = std::function<std::vector<Tensor>(const std::vector<Value>& args)>;
void registerExternalTarget(const std::string& target, ExternalTarget run);

// With `decomposeComposites`, ops without a derivative formula of their own are decomposed too,
// whatever the level, as the joint trace does (OpRecorder::decomposeOpsWithoutFormula): at level
// None that is the ATen graph autograd sees, where aliasing is explicit (reshape is a view or a
// copy, contiguous an alias or a clone), which functionalization needs.
Graph retrace(const Graph& g, DecomposeTo level, bool decomposeComposites = false);

// AOT autograd's joint graph (make_fx of the forward and the backward): `g`'s ops are traced
// with grad mode on and the inputs (placeholders and get_attrs, in order) flagged in
// `requiresGrad` as leaves that require grad, so the Autograd key below the recorder builds the
// backward graph on the fakes; then the engine runs it from the outputs that require grad, each
// seeded by a new placeholder `tangents_k` (after the inputs), and the ops the backward runs
// are recorded too. The output is the tuple (forward outputs..., gradient of each flagged
// input...), None where no gradient reaches an input. Ops are recorded as called (no
// decomposition: retrace the result to a level).
struct JointGraph {
  Graph graph{""};
  size_t numForwardOutputs = 0;
  std::vector<bool> tangentFor;   // per forward output: it requires grad (has a tangent)
  std::vector<size_t> gradInputs; // the inputs whose gradients follow the forward outputs
};
JointGraph traceJoint(const Graph& g, const std::vector<bool>& requiresGrad);

} // namespace kiln::compiler
