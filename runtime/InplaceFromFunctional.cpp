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
  checkInplaceResult(inplaceOp, self, result);
  ops::copy_(self, result, false);
  stack.clear();
  stack.emplace_back(std::move(self));
}

void checkInplaceResult(OpId inplaceOp, const Tensor& self, const Tensor& result) {
  const std::string& name = Dispatcher::instance().schema(inplaceOp).name;
  KILN_CHECK(DimVector(result.sizes()) == DimVector(self.sizes()), name, ": output with shape ",
             self.shapeString(), " doesn't match the broadcast shape ", result.shapeString());
  KILN_CHECK(canCast(result.dtype(), self.dtype()), name, ": result type ",
             scalarTypeShortName(result.dtype()), " can't be cast to the desired output type ",
             scalarTypeShortName(self.dtype()));
}

} // namespace kiln
