// Saved tensors and their in-place checks.
#include "runtime/autograd/SavedVariable.h"

#include "runtime/DispatchKey.h"
#include "runtime/autograd/AutogradMeta.h"
#include <cstdint>

namespace kiln::autograd {

SavedVariable::SavedVariable(const Tensor& t, bool isOutput, bool metadataOnly) {
  if (!t.defined()) return;
  KILN_CHECK(!t.impl()->isInference || InferenceMode::isEnabled(),
             "Inference tensors cannot be saved for backward. To work around you can make a clone to "
             "get a normal tensor and use it in autograd.");
  defined_ = true;
  metadataOnly_ = metadataOnly;
  if (metadataOnly) {
    data_ = Tensor::emptyStrided(t.sizes(), t.strides(), t.dtype(), Device(DeviceType::Meta));
    return;
  }
  version_ = t.storage()->version();
  isOutput_ = isOutput;
  requiresGrad_ = t.requiresGrad();
  if (isOutput) {
    // Keep the data without the history (the history is the node saving it).
    data_ = t.asStrided(t.sizes(), t.strides(), t.storageOffset());
    if (AutogradMeta* m = metaIfAny(t)) outputNr_ = m->outputNr;
  } else {
    data_ = t;
  }
  if (std::shared_ptr<SavedTensorHooks> hooks = currentSavedTensorHooks()) {
    // No hooks while packing: a pack hook's own ops save nothing through it.
    popSavedTensorHooks();
    struct Restore {
      std::shared_ptr<SavedTensorHooks> h;
      ~Restore() { pushSavedTensorHooks(std::move(h)); }
    } restore{hooks};
    packed_ = hooks->pack(data_);
    hooks_ = std::move(hooks);
    data_ = Tensor();
  }
}

static thread_local std::vector<std::shared_ptr<SavedTensorHooks>> hookStack;

std::shared_ptr<SavedTensorHooks> currentSavedTensorHooks() {
  return hookStack.empty() ? nullptr : hookStack.back();
}

void pushSavedTensorHooks(std::shared_ptr<SavedTensorHooks> hooks) { hookStack.push_back(std::move(hooks)); }

void popSavedTensorHooks() {
  if (!hookStack.empty()) hookStack.pop_back();
}

// "torch.FloatTensor", as PyTorch names a tensor type in this message.
static std::string typeName(const Tensor& t) {
  return strCat("torch.", scalarTypeShortName(t.dtype()), "Tensor");
}

Tensor SavedVariable::unpack(Node* owner) const {
  if (!defined_) {
    KILN_CHECK(!released_,
               "Trying to backward through the graph a second time (or directly access saved tensors "
               "after they have already been freed). Saved intermediate values of the graph are freed "
               "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
               "backward through the graph a second time or if you need to access saved tensors after "
               "calling backward.");
    return Tensor();
  }
  if (metadataOnly_) return data_;
  if (hooks_) {
    // What the unpack hook gives back is the tensor (torch checks no version here either).
    Tensor t = hooks_->unpack(packed_);
    KILN_CHECK(t.defined(), "the unpack hook of saved_tensors_hooks returned None instead of a Tensor");
    if (isOutput_ && requiresGrad_ && GradMode::isEnabled() && owner) {
      Tensor out = t.asStrided(t.sizes(), t.strides(), t.storageOffset());
      AutogradMeta& m = metaOf(out);
      m.gradFn = IntrusivePtr<Node>(owner);
      m.outputNr = outputNr_;
      out.impl()->requiresGrad = true;
      return out;
    }
    return t;
  }
  uint32_t now = data_.storage()->version();
  if (now != version_) {
    // Named by the node that wrote it last, as PyTorch does ("output 0 of Add").
    std::string what;
    if (AutogradMeta* m = metaIfAny(data_); m && m->gradFn) {
      std::string node = m->gradFn->name();
      if (node.size() > 9 && node.ends_with("Backward0")) node.resize(node.size() - 9);
      what = strCat(", which is output ", m->outputNr, " of ", node, ",");
    }
    throw Error(strCat("one of the variables needed for gradient computation has been modified by an "
                       "inplace operation: [", typeName(data_), " ", data_.shapeString(), "]", what,
                       " is at version ", now, "; expected version ", version_,
                       " instead. Hint: enable anomaly detection to find the operation that failed to "
                       "compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."));
  }
  if (isOutput_ && requiresGrad_ && GradMode::isEnabled() && owner) {
    // Double backward: the saved output must lead back to the node that made it.
    Tensor t = data_.asStrided(data_.sizes(), data_.strides(), data_.storageOffset());
    AutogradMeta& m = metaOf(t);
    m.gradFn = IntrusivePtr<Node>(owner);
    m.outputNr = outputNr_;
    t.impl()->requiresGrad = true;
    return t;
  }
  return data_;
}

void SavedVariable::reset() {
  if (defined_) released_ = true;
  data_ = Tensor();
  packed_.reset();
  hooks_.reset();
  defined_ = false;
}

} // namespace kiln::autograd
