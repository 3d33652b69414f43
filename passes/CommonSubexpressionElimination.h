// Common-subexpression elimination ("cse").
//
// Walks the graph in order and keys every mergeable node on (opcode, target, args, kwargs):
// node references by identity (so it works bottom-up: once %b duplicates %a, later nodes using
// %b use %a and can match in turn), constants exactly (1, 1.0 and True differ; floats bit for
// bit), kwargs regardless of their order. A node whose key was seen before is replaced by the
// earlier node in all its uses and erased; the earlier node keeps its meta (taking the type of
// the duplicate when it had none).
//
// Mergeable: get_attr, and call_function / call_method nodes without side effects that are
// deterministic (ir/Effects.h). Never merged: mutating ops, random or nondeterministic ops
// (tags random, nondeterministic), call_module, placeholders, the output; nor two reads of a
// storage that an in-place write changes between them (their keys count the writes before).
#pragma once
#include "ir/Graph.h"

namespace kiln {

void eliminateCommonSubexpressions(Graph& g);

} // namespace kiln
