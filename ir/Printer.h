// The text form of graphs (grammar in docs/ir-text.md):
//
//   graph @fn(%x: f32[8, 16], %w: f32[16, 32]) {
//     %mm = call_function aten.mm(%x, %w) : f32[8, 32]
//     %s = call_method sum(%mm, dim=[1], keepdim=True) : f32[8, 1] loc("model.py":12:forward)
//     output (%mm, %s)
//   }
//
// Printing then parsing gives back the same graph, and printing that gives the same bytes.
#pragma once
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace kiln {

std::string printGraph(const Graph& g);
// Graphs separated by a blank line.
std::string printGraphs(const std::vector<Graph>& graphs);
// One argument as it appears in an argument list: 1, 2.5, "s", f32, %x, [1, 2], slice(0, None, 2).
std::string printArgument(const Argument& a);
// Python's repr of a float: shortest text that reads back to the same double ("0.1", "1e-05",
// "2.0", "inf", "nan").
std::string printFloat(double d);
// A double-quoted string with \\, \", \n, \t, \r and \xNN escapes for other control bytes.
std::string quoteString(const std::string& s);

} // namespace kiln
