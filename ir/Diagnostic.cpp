// Rendering diagnostics with the offending source line and a caret under the column.
#include "ir/Diagnostic.h"

namespace kiln {

std::string formatDiagnostic(const Diagnostic& d, std::string_view fileName,
                             std::string_view source) {
  std::string out(fileName);
  if (!d.pos.known()) return out + ": error: " + d.message + "\n";
  out += ":" + std::to_string(d.pos.line) + ":" + std::to_string(d.pos.col) +
         ": error: " + d.message + "\n";
  size_t start = 0;
  for (int line = 1; line < d.pos.line && start != std::string_view::npos; ++line) {
    start = source.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos || start > source.size()) return out;
  size_t end = source.find('\n', start);
  std::string_view text = source.substr(start, end == std::string_view::npos ? end : end - start);
  out += std::string(text) + "\n";
  // Tabs stay tabs so the caret lines up under the same column in a terminal.
  std::string caret;
  for (size_t i = 0; i + 1 < size_t(d.pos.col) && i < text.size(); ++i)
    caret += text[i] == '\t' ? '\t' : ' ';
  return out + caret + "^\n";
}

} // namespace kiln
