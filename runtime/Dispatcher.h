// The dispatcher: the one extension point every op call goes through. An op's call computes a
// key set from its tensor arguments and the thread's modes, then runs the kernel (or fallback)
// of the highest-priority key that has one.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "generated/OpId.h"
#include "runtime/DispatchKey.h"
#include "runtime/OpSchema.h"
#include "runtime/Value.h"

namespace kiln {

using BoxedKernel = void (*)(Stack& stack);
// A fallback sees the op and the keys still to run; it usually redispatches below its own key.
using BoxedFallback = void (*)(OpId op, DispatchKeySet remaining, Stack& stack);

class Dispatcher {
public:
  static Dispatcher& instance();

  const OpSchema& schema(OpId op) const { return ops_[size_t(op)].schema; }
  size_t numOps() const { return ops_.size(); }
  // Every overload of an op name of a namespace ("add" -> add.Tensor, add.Scalar), in table order.
  std::vector<OpId> overloadsOf(const std::string& name, std::string_view ns = "aten") const;
  // "add.Tensor" or "add" (the default overload) of a namespace; NumOps when unknown.
  OpId find(const std::string& qualifiedName, std::string_view ns = "aten") const;

  void registerKernel(OpId op, DispatchKey key, BoxedKernel kernel);
  // A fallback of a backend key runs for ops with no kernel (and no composite) for it.
  void registerFallback(DispatchKey key, BoxedFallback fallback);
  bool hasKernel(OpId op, DispatchKey key) const {
    return ops_[size_t(op)].kernels[int(key)] != nullptr;
  }
  BoxedKernel kernel(OpId op, DispatchKey key) const { return ops_[size_t(op)].kernels[int(key)]; }

  // Runs op on the stack (every argument present, in schema order); leaves the returns.
  void call(OpId op, Stack& stack) const;
  // Runs op with only the keys in `keys` considered (used by fallbacks to go one level down).
  void redispatch(OpId op, DispatchKeySet keys, Stack& stack) const;
  // The key set a call would start from.
  DispatchKeySet computeKeys(OpId op, const Stack& stack) const;

private:
  Dispatcher();
  struct Entry {
    OpSchema schema;
    BoxedKernel kernels[kNumDispatchKeys] = {};
    std::vector<int> tensorArgs; // indices of Tensor / Tensor[] arguments
    std::vector<int> dtypeArgs;  // indices of ScalarType arguments
    bool tracksViews = false;    // a view op: seen by Autograd whenever grad mode is on
    int factoryDeviceArg = -1;   // a creation op's Device argument (it picks the backend)
  };
  std::vector<Entry> ops_;
  BoxedFallback fallbacks_[kNumDispatchKeys] = {};
};

// Filled by the op table generator.
std::vector<OpSchema> generatedSchemas();
void registerGeneratedKernels(Dispatcher& d);

} // namespace kiln
