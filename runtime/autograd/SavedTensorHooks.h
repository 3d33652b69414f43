// Saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks): while a pair is in effect on a
// thread, every tensor an autograd node saves for backward is handed to pack() and what pack()
// returns is kept instead; the backward gets the tensor back from unpack(). Activation
// checkpointing keeps nothing and recomputes; other hooks move saved tensors elsewhere.
#pragma once
#include <memory>

#include "runtime/TensorImpl.h"

namespace kiln::autograd {

class SavedTensorHooks {
public:
  virtual ~SavedTensorHooks() = default;
  // What a node keeps in place of t (t has no history when it is the node's own output).
  virtual std::shared_ptr<void> pack(const Tensor& t) = 0;
  // The tensor for what pack() returned, when the backward needs it.
  virtual Tensor unpack(const std::shared_ptr<void>& packed) = 0;
};

// The innermost hooks in effect on this thread, or nullptr.
std::shared_ptr<SavedTensorHooks> currentSavedTensorHooks();
void pushSavedTensorHooks(std::shared_ptr<SavedTensorHooks> hooks);
void popSavedTensorHooks();

} // namespace kiln::autograd
