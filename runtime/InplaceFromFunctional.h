// The generic in-place kernel: run the functional op, check the result fits self (same shape
// after broadcasting, dtype castable), copy it into self and return self.
#pragma once
#include "generated/OpId.h"
#include "runtime/Value.h"

namespace kiln {

void inplaceFromFunctional(OpId inplaceOp, OpId functionalOp, Stack& stack);
// The checks of an in-place op's functional result against self (PyTorch's messages).
void checkInplaceResult(OpId inplaceOp, const Tensor& self, const Tensor& result);

} // namespace kiln
