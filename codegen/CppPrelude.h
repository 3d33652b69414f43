// The fixed head of every generated C++ source: standard headers, the KilnContext struct the
// caller fills in, and the scalar helpers the kernels call (16-bit float conversions, Python
// floor division, wrapping integer arithmetic, NaN-propagating maximum/minimum).
#pragma once
#include <string>

namespace kiln::codegen {

// The prelude text; kernels and kiln_entry follow it.
const std::string& cppPrelude();

} // namespace kiln::codegen
