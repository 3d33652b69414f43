// Diagnostics about graph IR: a message and, when the IR came from text, the position it points
// at. Rendered as "file:line:col: error: message" plus the offending line and a caret.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "runtime/Error.h"

namespace kiln {

// A 1-based line and column in IR text; line 0 when the IR was not parsed from text.
struct TextPos {
  int line = 0;
  int col = 0;
  bool known() const { return line > 0; }
};

struct Diagnostic {
  TextPos pos;
  std::string message;
};

// A malformed graph or a pass that cannot proceed; carries its diagnostic.
class IRError : public Error {
public:
  explicit IRError(Diagnostic d) : Error(d.message), diag_(std::move(d)) {}
  IRError(TextPos pos, std::string message) : IRError(Diagnostic{pos, std::move(message)}) {}
  const Diagnostic& diagnostic() const { return diag_; }

private:
  Diagnostic diag_;
};

// "file:line:col: error: message\n<line>\n<caret>\n", or "file: error: message\n" when the
// position is unknown. `source` is the whole text the line numbers refer to.
std::string formatDiagnostic(const Diagnostic& d, std::string_view fileName,
                             std::string_view source);

} // namespace kiln
