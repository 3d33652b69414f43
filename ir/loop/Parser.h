// Parsing the loop program text form (docs/loop-ir.md) and index expressions. Malformed input
// gives a Diagnostic at the offending line and column; the parser never asserts or crashes.
// It checks syntax, unique names, that loads and outputs name known buffers or inputs defined
// earlier, and that body values are defined before use; the loop verifier checks the rest.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln {

struct LoopParseResult {
  std::vector<LoopProgram> programs; // every program in the text, in order (empty on error)
  std::optional<Diagnostic> error;   // the first error, if any
};

// Parses every program in `text`; line numbers start at `firstLine`.
LoopParseResult parseLoopPrograms(std::string_view text, int firstLine = 1);
// Parses text holding exactly one program; throws IRError otherwise.
LoopProgram parseLoopProgram(std::string_view text);
// Parses text holding exactly one index expression ("16*i0 + floordiv(i1, 4)"); the result is
// canonical (built with IndexExpr's operators). Throws IRError on malformed text.
IndexExpr parseIndexExpr(std::string_view text);
// True when the first token of `text` (after comments) is the keyword `program`.
bool isLoopProgramText(std::string_view text);

} // namespace kiln
