// Parsing the graph text form (docs/ir-text.md) back into Graphs. Malformed input gives a
// Diagnostic at the offending line and column; the parser never asserts or crashes on input.
// It checks syntax, names (no duplicates, no use of undefined or later-defined values) and
// "aten.*" targets against the op table; the Verifier checks everything else.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

#include "ir/Graph.h"

namespace kiln {

struct ParseResult {
  std::vector<Graph> graphs;       // every graph in the text, in order (empty on error)
  std::optional<Diagnostic> error; // the first error, if any
};

// Parses every graph in `text`. Line numbers in diagnostics and Node::parsedAt start at
// `firstLine` (for a chunk of a larger file).
ParseResult parseGraphs(std::string_view text, int firstLine = 1);
// Parses text holding exactly one graph; throws IRError otherwise.
Graph parseGraph(std::string_view text);
// Parses text holding exactly one type ("f32[s0, 16]{strides=[1, s0]}", "(f32[2], i64[2])",
// "int"); throws IRError otherwise.
Type parseType(std::string_view text);

} // namespace kiln
