// The math part of the generated sources' prelude (see CppPrelude.h). libm's functions are
// scalar calls that stop a loop from vectorizing (std::tanh: ~30 ns per element), so exp, expm1,
// log, log1p and tanh are written here branch-free (selects only, which GCC if-converts under
// -fno-trapping-math) and inline; the others use glibc's libmvec vector variants.
#include "codegen/CppPrelude.h"
#include <cstdint>

namespace kiln::codegen {

// The text of runtime/cpu/KilnMath.inc (the eager kernels include the same file), embedded as a
// raw string by codegen/CMakeLists.txt.
const std::string& cppPreludeMath() {
  static const std::string text =
#include "generated/KilnMathText.inc"
      ;
  return text;
}

} // namespace kiln::codegen
