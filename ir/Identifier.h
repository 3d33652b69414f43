// What the text form accepts as a bare name: value names ([A-Za-z0-9_]+ after '%') and
// identifiers (the same, not starting with a digit) for symbols, keywords and graph names.
#pragma once
#include <algorithm>
#include <string_view>

namespace kiln {

inline bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

inline bool isIdentifier(std::string_view s) {
  return !s.empty() && !(s[0] >= '0' && s[0] <= '9') && std::all_of(s.begin(), s.end(), isNameChar);
}

} // namespace kiln
