// Constant folding ("constant-fold").
//
// Replaces a call_function node by its value when every argument is a constant (no node
// references, no kwargs) and evaluating it is a pure Python operation on numbers:
//  - operator.add, sub, mul, truediv, floordiv, mod, neg, pos on bool / int / float, with
//    Python's semantics (bool counts as int; int / int is a float; // and % round toward
//    negative infinity, for floats as CPython computes them);
//  - operator.eq, ne, lt, le, gt, ge on numbers;
//  - operator.getitem of a constant list or tuple by an in-range int index.
// Uses of the node get the constant instead, and the node is erased; folding cascades, since
// nodes are visited in order. Nothing is folded where Python would raise (division by zero)
// or where int64 cannot hold the exact result (Python ints do not overflow), nor where a
// float computation would not be exact (int / int with operands beyond 2**53, int vs float
// comparisons beyond 2**53). ATen ops are not folded: the IR has no tensor constants.
#pragma once
#include "ir/Graph.h"

namespace kiln {

void foldConstants(Graph& g);

} // namespace kiln
