// A tensor saved for backward: checked against in-place changes when unpacked (the version of
// its storage must not have moved), and freed after a backward without retain_graph. Under
// saved-tensor hooks (SavedTensorHooks.h) what pack() returned is kept instead of the tensor.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/autograd/Node.h"
#include "runtime/autograd/SavedTensorHooks.h"

namespace kiln::autograd {

class SavedVariable {
public:
  SavedVariable() = default;
  // `isOutput`: t is an output of the node that saves it (kept without its grad_fn, which would
  // be a reference cycle, and given that node back on unpack). `metadataOnly`: only sizes,
  // strides and dtype are kept (a meta tensor), for formulas that read nothing else.
  SavedVariable(const Tensor& t, bool isOutput, bool metadataOnly = false);

  // The saved tensor; `owner` is the node unpacking it (for outputs).
  Tensor unpack(Node* owner) const;
  void reset();
  bool defined() const { return defined_; }

private:
  Tensor data_;
  std::shared_ptr<SavedTensorHooks> hooks_; // with packed_: the hooks that packed the tensor
  std::shared_ptr<void> packed_;
  uint32_t version_ = 0;
  uint32_t outputNr_ = 0;
  bool defined_ = false;
  bool isOutput_ = false;
  bool released_ = false;
  bool requiresGrad_ = false;
  bool metadataOnly_ = false;
};

} // namespace kiln::autograd
