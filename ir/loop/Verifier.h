// The loop IR verifier: the invariants lowering produces and scheduling and codegen rely on.
//
//  - names: inputs and buffers unique; loop variables unique within a computation and distinct
//    from the size symbols (the variables of the inputs' sizes and strides); kernels' buffers
//    adjacent; outputs name inputs or buffers
//  - sizes, strides and range extents use only size symbols and are not negative constants;
//    a pointwise or reduction computation's (output) ranges cover exactly the buffer's elements
//  - bodies: every operand an earlier value (no use before definition), a pointwise body ends in
//    its one store, a reduction body in its one reduce; loads read an input or an earlier
//    buffer with the dtype recorded on the load; index expressions use only the computation's
//    loop variables and size symbols, and a load whose bounds are known stays inside its buffer
//  - dtypes: math operands as checkLoopOpDtypes requires, each op's dtype the one its operands
//    give; index_expr i32 or i64; constants fit their dtype; the stored value has the buffer's
//    dtype, the reduced value gives it (reductionResultDtype); welford reductions are floating
//  - externs read inputs or earlier buffers; keyword names are identifiers, none repeated
//
// Each problem is a Diagnostic at the parsed position of what it is about ("%buf0: ...").
#pragma once
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln {

// Every problem found, in program order; empty for a well-formed program.
std::vector<Diagnostic> verifyLoopProgram(const LoopProgram& p);
// Throws IRError carrying the first problem.
void verifyLoopProgramOrThrow(const LoopProgram& p);

} // namespace kiln
