// A custom kiln.autograd.Function under kiln.compile (TorchDynamo's AutogradFunctionApplyVariable):
// the capture records its application as one node, `kiln.autograd.function.apply_captured(key,
// tensors...)`, after tracing its forward and its Python backward on fakes apart from the graph;
// retrace and AOT's joint trace run the application on their fakes (compiler/GraphTracer.h's
// external targets), so the forward and backward graphs hold the ops the user's code calls.
// Python side: frontend/python/kiln/autograd/function.py.
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

void registerCustomFunctionCapture(nanobind::module_& m);

} // namespace kiln::python
