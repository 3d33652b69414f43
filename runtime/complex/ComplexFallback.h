// The Complex dispatch key's fallback: ops with no complex kernel of their own (`complex:` in the
// op table) pass below the key when they never look at element values (views, composites,
// empty), and otherwise raise NotImplementedError naming the op and the dtype.
#pragma once

namespace kiln {
class Dispatcher;
}

namespace kiln::complex {

void registerComplexFallback(Dispatcher& d);

// The complex kernels of ComplexMath.cpp (mm, bmm, matmul, log, sqrt, sin, cos, tanh, pow,
// where, gather, cumsum, prod), registered by hand for the Complex key.
void registerComplexMathKernels(Dispatcher& d);

} // namespace kiln::complex
