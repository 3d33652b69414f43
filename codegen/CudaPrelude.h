// The fixed head of every generated CUDA source (codegen/CudaCodegen.h): fixed-width integer
// types, the KilnError a kernel reports an out-of-range indirect index to, and device versions
// of the C++ prelude's helpers under the same names (codegen/CppPrelude.cpp), so the loop bodies
// CppExpr renders compile unchanged: 16-bit float conversions, Python floor division, wrapping
// integer arithmetic, NaN-propagating maximum/minimum, math as CUDA's libdevice functions, and
// the warp shuffle the block reductions combine with. No headers: NVRTC compiles it alone.
#pragma once
#include <string>

namespace kiln::codegen {

const std::string& cudaPrelude();

} // namespace kiln::codegen
