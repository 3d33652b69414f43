// kiln._C._fx: the graph IR's Python face (Graph, Node, Type, text form, verifier, passes).
// kiln.fx (frontend/python/kiln/fx/) builds the torch.fx-style API on these classes.
#pragma once
#include <nanobind/nanobind.h>

#include "ir/Graph.h"

namespace kiln::python {

void registerFx(nanobind::module_& m);
// A kiln.fx.Graph owning `g`.
nanobind::object wrapGraph(Graph g);
// The C++ graph of a kiln.fx.Graph, or null when `graph` is not one.
const Graph* cppGraphOf(nanobind::handle graph);

} // namespace kiln::python
