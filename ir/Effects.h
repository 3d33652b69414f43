// What removing or merging a node could change: side effects (mutation, random state, unknown
// code) and nondeterminism, judged from the op table's schemas and tags.
//
// Side effects: ops with a mutated argument (Tensor(a!)) or the random tag; torch-level calls
// (call_method "add_", call_function "kiln.add") by every overload of that name in the table,
// and names ending in "_" (in-place by convention); call_module (unknown code); call_function
// targets the table does not know, except a short list of pure Python callables (operator.*
// arithmetic and comparisons, getitem, math.*). Placeholders and the output are never removable.
// Nondeterministic: ops tagged random or nondeterministic.
#pragma once
#include "ir/Node.h"

namespace kiln {

bool hasSideEffects(const Node& n);
bool isDeterministic(const Node& n);

} // namespace kiln
