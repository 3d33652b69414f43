// fuse-gemm-epilogue: a kernel that only transforms a GEMM's product element by element (the
// bias and GELU after a linear layer, a residual add) takes the GEMM in: the extern mm moves
// into the kernel, and the code generator runs the kernel's body as the GEMM's post-ops
// (ir/loop/GemmEpilogue.h) instead of writing the product to memory and reading it back.
#pragma once
#include <string>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln::passes::loop {

// After the kernels are formed: each kernel of one pointwise buffer whose body is a chain of
// post-ops of an extern mm that nothing else reads (not an output, not written in place) gets
// that mm, placed right before it. Returns one log line per kernel it looked at.
std::vector<std::string> fuseGemmEpilogues(LoopProgram& p);

} // namespace kiln::passes::loop
