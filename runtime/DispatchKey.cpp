// Thread-local dispatch state: include/exclude sets, grad mode, inference mode.
#include "runtime/DispatchKey.h"

namespace kiln {

const char* dispatchKeyName(DispatchKey k) {
  static constexpr const char* names[] = {"Autocast", "Tracing", "Autograd", "Functionalize",
                                          "CompositeImplicit", "Meta", "CUDA", "CPU"};
  return k < DispatchKey::NumKeys ? names[int(k)] : "Undefined";
}

LocalDispatchKeySet& localDispatchKeySet() {
  thread_local LocalDispatchKeySet s;
  return s;
}

IncludeDispatchKeyGuard::IncludeDispatchKeyGuard(DispatchKey k)
    : saved_(localDispatchKeySet().included) {
  localDispatchKeySet().included = saved_ | DispatchKeySet(k);
}
IncludeDispatchKeyGuard::~IncludeDispatchKeyGuard() { localDispatchKeySet().included = saved_; }

ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(DispatchKey k)
    : saved_(localDispatchKeySet().excluded) {
  localDispatchKeySet().excluded = saved_ | DispatchKeySet(k);
}
ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard() { localDispatchKeySet().excluded = saved_; }

namespace {
thread_local bool gradEnabled = true;
thread_local bool inferenceEnabled = false;
} // namespace

bool GradMode::isEnabled() { return gradEnabled; }
void GradMode::setEnabled(bool on) { gradEnabled = on; }
bool InferenceMode::isEnabled() { return inferenceEnabled; }
void InferenceMode::setEnabled(bool on) { inferenceEnabled = on; }

} // namespace kiln
