// The fixed head of every generated C++ source: the KilnContext struct the caller fills in, and
// the scalar helpers the kernels call (16-bit float conversions, Python floor division, wrapping
// integer arithmetic, NaN-propagating maximum/minimum, vectorizable math).
#pragma once
#include <string>

namespace kiln::codegen {

// The prelude text; kernels and kiln_entry follow it.
const std::string& cppPrelude();
// The math part of the prelude (CppPreludeMath.cpp): branch-free float/double exp, expm1, log,
// log1p, tanh that vectorize in `omp simd` loops, and glibc's libmvec for the other libm
// functions. Generated code links with -lmvec.
const std::string& cppPreludeMath();

} // namespace kiln::codegen
