// Type promotion, broadcasting, numbers and dims made explicit for the Core ATen -> Prims
// decompositions (see PrimsCommon.h).
#include "compiler/decompositions/PrimsCommon.h"

#include <cstdint>
#include <algorithm>

#include "runtime/TensorIterator.h"

namespace kiln::decompositions {

Operand::Operand(const Tensor& t) {
  if (t.isWrappedNumber())
    number = t.item();
  else
    tensor = t;
}

ScalarType computationDtype(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 ? ScalarType::Float32 : t;
}

ElementwiseDtypes elementwiseDtypes(const std::vector<Operand>& operands, PromotionKind kind) {
  std::vector<Tensor> forPromotion;
  for (const Operand& o : operands)
    forPromotion.push_back(o.tensor ? *o.tensor : Tensor::wrapScalar(o.number));
  ScalarType common = resultType(forPromotion);
  switch (kind) {
  case PromotionKind::IntToFloat:
    if (!isFloatingType(common)) common = defaultFloat();
    return {computationDtype(common), common};
  case PromotionKind::AlwaysBool:
    return {common, ScalarType::Bool};
  case PromotionKind::NoOpMath:
  case PromotionKind::None:
    return {common, common};
  case PromotionKind::Default:
    break;
  }
  return {computationDtype(common), common};
}

Device deviceOf(const std::vector<Operand>& operands) {
  for (const Operand& o : operands)
    if (o.tensor) return o.tensor->device();
  return Device();
}

DimVector broadcastShape(const char* op, const std::vector<Operand>& operands) {
  DimVector shape;
  for (const Operand& o : operands)
    if (o.tensor) shape = broadcastShapes(op, shape, o.tensor->sizes());
  return shape;
}

Tensor convert(const Tensor& t, ScalarType dtype) {
  return t.dtype() == dtype ? t : ops::prims::convert_element_type(t, dtype);
}

Tensor broadcastTo(const Tensor& t, IntArrayRef shape) {
  if (t.sizes() == shape) return t;
  int64_t lead = int64_t(shape.size()) - t.dim();
  KILN_CHECK(lead >= 0, "cannot broadcast ", t.shapeString(), " to ", shapeString(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < t.dim(); ++i)
    dims.push_back(lead + i);
  return ops::prims::broadcast_in_dim(t, shape, dims);
}

Tensor filled(const Scalar& value, ScalarType dtype, Device device, IntArrayRef shape) {
  return broadcastTo(ops::prims::full({}, value, dtype, device), shape);
}

Tensor filledLike(const Tensor& like, const Scalar& value) {
  return filled(value, like.dtype(), like.device(), like.sizes());
}

Tensor materialize(const Operand& operand, ScalarType dtype, Device device, IntArrayRef shape) {
  if (operand.isNumber()) return filled(operand.number, dtype, device, shape);
  return broadcastTo(convert(*operand.tensor, dtype), shape);
}

DimVector reductionDims(const Tensor& self, std::optional<IntArrayRef> dims, bool emptyMeansAll) {
  DimVector out;
  if (!dims || (dims->empty() && emptyMeansAll)) {
    for (int64_t d = 0; d < self.dim(); ++d)
      out.push_back(d);
    return out;
  }
  for (int64_t d : *dims) {
    int64_t w = wrapDim(d, std::max<int64_t>(self.dim(), 1));
    if (self.dim() == 0) continue;
    KILN_CHECK(std::find(out.begin(), out.end(), w) == out.end(), "dim ", w,
               " appears multiple times in the list of dims");
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t reductionSize(const Tensor& self, IntArrayRef dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= self.size(d);
  return n;
}

Tensor keepDims(const Tensor& reduced, const Tensor& self, IntArrayRef dims, bool keepdim) {
  if (!keepdim) return reduced;
  DimVector shape(self.sizes());
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end())
      shape[size_t(d)] = 1;
    else
      kept.push_back(d);
  }
  return ops::prims::broadcast_in_dim(reduced, shape, kept);
}

} // namespace kiln::decompositions
