// Building blocks of the Core ATen -> Prims decompositions: PyTorch's elementwise type
// promotion made explicit (convert_element_type), broadcasting made explicit
// (broadcast_in_dim), numbers as 0-d prims.full tensors, ATen dim conventions (negative dims,
// 0-d tensors, keepdim) turned into the Prims IR's explicit dims. Every tensor is made by a
// kiln::ops::prims call, so tracing a decomposition records only prims.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "generated/Ops.h"
#include "runtime/DefaultDtype.h"
#include "runtime/DimVector.h"
#include "runtime/OpSchema.h"

namespace kiln::decompositions {

// The float dtype integer inputs of int-to-float ops become, and factories without a dtype make:
// the default dtype (float32 unless kiln.set_default_dtype changed it; graphs are guarded on it).
inline ScalarType defaultFloat() { return defaultFloatType(); }

// An operand of an elementwise ATen op: a tensor, or a number (a Scalar argument or a
// wrapped-number tensor: a Python number passed for a Tensor argument).
struct Operand {
  std::optional<Tensor> tensor;
  Scalar number;

  Operand(const Tensor& t);
  Operand(const Scalar& s) : number(s) {}
  bool isNumber() const { return !tensor; }
};

// PyTorch's elementwise_dtypes: the dtype an op computes in (float for 16-bit floats, where
// the eager kernels compute in float too) and the dtype it returns.
struct ElementwiseDtypes {
  ScalarType compute;
  ScalarType result;
};
ElementwiseDtypes elementwiseDtypes(const std::vector<Operand>& operands, PromotionKind kind);

// The device of the first tensor operand (while tracing, a fake's meta device: the recorder
// puts factories given it where the decomposed op's result lives).
Device deviceOf(const std::vector<Operand>& operands);
// The broadcast shape of the tensor operands (numbers broadcast to anything).
DimVector broadcastShape(const char* op, const std::vector<Operand>& operands);

// `t` as `dtype` (prims.convert_element_type when it differs; `t` itself otherwise).
Tensor convert(const Tensor& t, ScalarType dtype);
// `t` broadcast to `shape` (prims.broadcast_in_dim, right-aligned; `t` itself when equal).
Tensor broadcastTo(const Tensor& t, IntArrayRef shape);
// A tensor of `shape` holding `value` as `dtype`: a 0-d prims.full broadcast (no copies).
Tensor filled(const Scalar& value, ScalarType dtype, Device device, IntArrayRef shape);
// `value` with the dtype, device and shape of `like`.
Tensor filledLike(const Tensor& like, const Scalar& value);
// An operand as a tensor of `dtype` and `shape`.
Tensor materialize(const Operand& operand, ScalarType dtype, Device device, IntArrayRef shape);

// Runs `body` on the operands promoted (per `kind`) to the compute dtype and broadcast to
// one shape, and converts its result to the result dtype: the shape of every decomposition
// of a pointwise ATen op.
template <typename Body>
Tensor pointwise(const char* op, const std::vector<Operand>& operands, PromotionKind kind,
                 Body body) {
  ElementwiseDtypes dtypes = elementwiseDtypes(operands, kind);
  DimVector shape = broadcastShape(op, operands);
  Device device = deviceOf(operands);
  std::vector<Tensor> ts;
  ts.reserve(operands.size());
  for (const Operand& o : operands)
    ts.push_back(materialize(o, dtypes.compute, device, shape));
  return convert(body(ts), dtypes.result);
}

// ATen reduction dims as the Prims IR's: wrapped, sorted, each once; None (or [] where
// `emptyMeansAll`) is every dim; a 0-d tensor's dim 0 / -1 names no dim.
DimVector reductionDims(const Tensor& self, std::optional<IntArrayRef> dims,
                        bool emptyMeansAll = true);
// The number of elements a reduction over `dims` combines.
int64_t reductionSize(const Tensor& self, IntArrayRef dims);
// A reduction's result (dims removed) with the reduced dims put back as size 1 when
// `keepdim` (prims.broadcast_in_dim).
Tensor keepDims(const Tensor& reduced, const Tensor& self, IntArrayRef dims, bool keepdim);
// The float dtype 16-bit floats compute in; other dtypes compute in themselves.
ScalarType computationDtype(ScalarType t);

} // namespace kiln::decompositions
