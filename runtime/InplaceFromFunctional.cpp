// In-place ops through their functional twin.
#include "runtime/InplaceFromFunctional.h"

#include "generated/Ops.h"
#include "runtime/Dispatcher.h"

namespace kiln {

void inplaceFromFunctional(OpId inplaceOp, OpId functionalOp, Stack& stack) {
  const Dispatcher& d = Dispatcher::instance();
  Tensor self = stack.at(0).toTensor();
  d.call(functionalOp, stack);
  Tensor result = stack.at(0).toTensor();
  const std::string& name = d.schema(inplaceOp).name;
  KILN_CHECK(DimVector(result.sizes()) == DimVector(self.sizes()), name, ": output with shape ",
             self.shapeString(), " doesn't match the broadcast shape ", result.shapeString());
  KILN_CHECK(canCast(result.dtype(), self.dtype()), name, ": result type ",
             scalarTypeShortName(result.dtype()), " can't be cast to the desired output type ",
             scalarTypeShortName(self.dtype()));
  ops::copy_(self, result, false);
  stack.clear();
  stack.emplace_back(std::move(self));
}

} // namespace kiln
