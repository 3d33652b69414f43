// TensorIterator: the one engine behind every pointwise op. It computes the result dtype
// (PyTorch's promotion, Python numbers included), the broadcast shape, allocates outputs
// (following the inputs' memory layout), casts inputs to the compute dtype, coalesces
// dimensions and runs a 1-D inner loop over the result, in parallel above a size threshold.
// Meta tensors get shapes and dtypes only: the loop never runs for them.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "runtime/OpSchema.h"
#include "runtime/TensorImpl.h"

namespace kiln {

struct TensorIteratorConfig {
  const char* opName = "op";
  std::vector<Tensor> outputs; // undefined entries are allocated
  std::vector<Tensor> inputs;
  PromotionKind promotion = PromotionKind::Default;
  // Inputs whose dtype is left alone (e.g. the condition of `where`).
  std::vector<bool> keepInputDtype;
  // Forces the compute dtype (inputs are cast to it) instead of promoting.
  std::optional<ScalarType> computeDtype;
  // Forces the output dtype (default: from the promotion kind).
  std::optional<ScalarType> outputDtype;
  // Leave input dtypes alone entirely (copy kernels convert inside the loop).
  bool castInputs = true;
  // With given outputs: may the result dtype differ from the output's? (in-place/out=)
  bool checkOutputCast = true;
};

class TensorIterator {
public:
  static constexpr size_t kMaxOperands = 16;
  explicit TensorIterator(TensorIteratorConfig config);

  static TensorIterator unary(const char* op, const Tensor& a,
                              PromotionKind kind = PromotionKind::Default, Tensor out = {});
  static TensorIterator binary(const char* op, const Tensor& a, const Tensor& b,
                               PromotionKind kind = PromotionKind::Default, Tensor out = {});

  // The dtype inputs were promoted to (and the loop computes in).
  ScalarType computeDtype() const { return computeDtype_; }
  ScalarType outputDtype() const { return operands_[0].dtype(); }
  ScalarType dtype(int operand) const { return operands_[size_t(operand)].dtype(); }
  const Tensor& output(int i = 0) const { return operands_[size_t(i)]; }
  const Tensor& input(int i) const { return operands_[size_t(noutputs_ + i)]; }
  int ntensors() const { return int(operands_.size()); }
  int noutputs() const { return noutputs_; }
  IntArrayRef shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  bool isMeta() const { return isMeta_; }

  // loop(data, strides, n): data[k] points at operand k's first element (outputs first),
  // strides[k] is its byte stride along the run, n the run length.
  using Loop = std::function<void(char** data, const int64_t* strides, int64_t n)>;
  void forEach(const Loop& loop, int64_t grainSize = 32768) const;

private:
  void computeTypes(const TensorIteratorConfig& c);
  void computeShape();
  void allocateOutputs(const TensorIteratorConfig& c);
  void buildIteration();
  void serialRange(const Loop& loop, int64_t begin, int64_t end) const;

  const char* opName_;
  std::vector<Tensor> operands_; // outputs then inputs
  int noutputs_ = 1;
  ScalarType computeDtype_ = ScalarType::Float32;
  ScalarType outputDtypeHint_ = ScalarType::Float32;
  DimVector shape_;
  int64_t numel_ = 0;
  bool isMeta_ = false;
  // Iteration space after reordering/coalescing: dims innermost-first.
  DimVector iterShape_;
  std::vector<DimVector> iterStrides_; // per operand, bytes, innermost-first
};

// PyTorch's result_type over tensors (wrapped numbers count as Python numbers).
ScalarType resultType(const std::vector<Tensor>& tensors);
// The broadcast of two shapes; RuntimeError naming the op when they do not broadcast.
DimVector broadcastShapes(const char* op, IntArrayRef a, IntArrayRef b);

} // namespace kiln
