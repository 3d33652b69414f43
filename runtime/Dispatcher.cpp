// Dispatcher tables and the call path.
#include "runtime/Dispatcher.h"

#include "runtime/Autocast.h"
#include "runtime/Error.h"
#include "runtime/autograd/AutogradKernels.h"
#include "runtime/cuda/CudaTensorKernels.h"

namespace kiln {

Dispatcher& Dispatcher::instance() {
  static Dispatcher* d = [] {
    auto* fresh = new Dispatcher();
    registerGeneratedKernels(*fresh);
    autograd::registerAutogradKernels(*fresh);
    cuda::registerCudaTensorKernels(*fresh);
    autocast::registerAutocast(*fresh);
    return fresh;
  }();
  return *d;
}

Dispatcher::Dispatcher() {
  for (OpSchema& s : generatedSchemas()) {
    Entry e;
    for (size_t i = 0; i < s.args.size(); ++i) {
      ArgType t = s.args[i].type;
      if (t == ArgType::Tensor || t == ArgType::TensorList || t == ArgType::OptionalTensorList)
        e.tensorArgs.push_back(int(i));
    }
    e.tracksViews = s.hasTag(kTagView);
    for (size_t i = 0; i < s.args.size() && s.hasTag(kTagCreation); ++i)
      if (s.args[i].type == ArgType::Device) e.factoryDeviceArg = int(i);
    e.schema = std::move(s);
    ops_.push_back(std::move(e));
  }
}

std::vector<OpId> Dispatcher::overloadsOf(const std::string& name, std::string_view ns) const {
  std::vector<OpId> out;
  for (size_t i = 0; i < ops_.size(); ++i)
    if (ops_[i].schema.name == name && ops_[i].schema.ns == ns) out.push_back(OpId(i));
  return out;
}

OpId Dispatcher::find(const std::string& qualifiedName, std::string_view ns) const {
  for (size_t i = 0; i < ops_.size(); ++i)
    if (ops_[i].schema.ns == ns && ops_[i].schema.qualifiedName() == qualifiedName) return OpId(i);
  return OpId::NumOps;
}

void Dispatcher::registerKernel(OpId op, DispatchKey key, BoxedKernel kernel) {
  ops_[size_t(op)].kernels[int(key)] = kernel;
}

void Dispatcher::registerFallback(DispatchKey key, BoxedFallback fallback) {
  fallbacks_[int(key)] = fallback;
}

static DispatchKey backendKeyOf(Device d) {
  return d.isCpu() ? DispatchKey::CPU : d.isMeta() ? DispatchKey::Meta : DispatchKey::CUDA;
}

static DispatchKeySet keysOf(const Tensor& t) {
  if (!t.defined()) return {};
  DispatchKeySet ks(backendKeyOf(t.device()));
  if (t.requiresGrad()) ks = ks | DispatchKeySet(DispatchKey::Autograd);
  return ks;
}

DispatchKeySet Dispatcher::computeKeys(OpId op, const Stack& stack) const {
  DispatchKeySet ks;
  for (int i : ops_[size_t(op)].tensorArgs) {
    const Value& v = stack[size_t(i)];
    if (v.isTensor()) {
      ks = ks | keysOf(v.toTensor());
    } else if (v.isTensorList()) {
      for (const Tensor& t : v.toTensorList()) ks = ks | keysOf(t);
    } else if (!v.isNone()) {
      for (const auto& t : v.toOptionalTensorList())
        if (t) ks = ks | keysOf(*t);
    }
  }
  const Entry& e = ops_[size_t(op)];
  // A factory's device= joins the keys of its tensor arguments (zeros_like(cpu_tensor,
  // device="cuda") must reach the CUDA kernel, not fill device memory from the CPU one).
  if (e.factoryDeviceArg >= 0 && !stack[size_t(e.factoryDeviceArg)].isNone())
    ks = ks | DispatchKeySet(backendKeyOf(stack[size_t(e.factoryDeviceArg)].toDevice()));
  // Other ops with no tensor inputs run on the device their arguments name.
  if (ks.below(DispatchKey::CompositeImplicit).empty()) {
    DispatchKey backend = DispatchKey::CPU;
    const OpSchema& s = ops_[size_t(op)].schema;
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (s.args[i].type == ArgType::Device && !stack[i].isNone()) {
        backend = backendKeyOf(stack[i].toDevice());
      }
    }
    ks = ks | DispatchKeySet(backend);
  }
  // Views are tracked whenever grad mode is on, so that an in-place write through a view can
  // later rewrite its base's history.
  if (e.tracksViews && GradMode::isEnabled()) ks = ks | DispatchKeySet(DispatchKey::Autograd);
  const LocalDispatchKeySet& local = localDispatchKeySet();
  return (ks | local.included) - local.excluded;
}

void Dispatcher::call(OpId op, Stack& stack) const { redispatch(op, computeKeys(op, stack), stack); }

void Dispatcher::redispatch(OpId op, DispatchKeySet keys, Stack& stack) const {
  const Entry& e = ops_[size_t(op)];
  while (!keys.empty()) {
    DispatchKey k = keys.highest();
    if (isBackendKey(k)) {
      if (BoxedKernel kern = e.kernels[int(k)]) return kern(stack);
      if (BoxedKernel kern = e.kernels[int(DispatchKey::CompositeImplicit)]) return kern(stack);
      if (BoxedFallback fb = fallbacks_[int(k)]) return fb(op, keys.below(k), stack);
      throw NotImplementedError(strCat("Could not run '", e.schema.qualifiedName(),
                                       "' with arguments from the '", dispatchKeyName(k),
                                       "' backend"));
    }
    if (BoxedKernel kern = e.kernels[int(k)]) return kern(stack);
    // Composite ops run their decomposition before any mode key sees them.
    if (k == DispatchKey::Autograd && e.kernels[int(DispatchKey::CompositeImplicit)])
      return e.kernels[int(DispatchKey::CompositeImplicit)](stack);
    if (BoxedFallback fb = fallbacks_[int(k)]) return fb(op, keys.below(k), stack);
    keys = keys.below(k); // fallthrough: this key has nothing to do for this op
  }
  throw Error(strCat("no kernel for '", e.schema.qualifiedName(), "'"));
}

} // namespace kiln
