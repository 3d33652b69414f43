// The graph verifier: the invariants every pass may rely on and must preserve.
//
//  - names are unique; every node belongs to the graph; users lists match the references
//  - placeholders come first; exactly one output node, and it is last; output has one argument
//  - every reference is to an earlier node of the same graph (no use before definition, no
//    dangling references)
//  - "aten.*" calls bind to their schema (positional count, keyword names, required
//    arguments) and each argument's kind fits its parameter type; an annotated type agrees with
//    the number of values the op returns
//  - keyword argument names are identifiers, none given twice
//  - tensor types have no negative constant sizes
//  - with requireTypes: every node but the output carries a type annotation
//
// Each problem is a Diagnostic naming the node ("%add: ...") at the node's parsed position.
#pragma once
#include <vector>

#include "ir/Graph.h"

namespace kiln {

struct VerifyOptions {
  bool requireTypes = false;
};

// Every problem found, in node order; empty for a well-formed graph.
std::vector<Diagnostic> verify(const Graph& g, const VerifyOptions& options = {});
// Throws IRError carrying the first problem.
void verifyOrThrow(const Graph& g, const VerifyOptions& options = {});

} // namespace kiln
