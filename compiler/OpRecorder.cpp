// OpRecorder: the Tracing key's fallback turns each dispatched op into a call_function node,
// then runs the op on meta tensors so the node's type is the op's real result type.
#include "compiler/OpRecorder.h"

#include <algorithm>

#include "compiler/Decompositions.h"
#include "runtime/Autocast.h"
#include "runtime/Error.h"
#include <cstdint>

namespace kiln::compiler {

namespace {

thread_local OpRecorder* gCurrent = nullptr;

Argument scalarArgument(const Scalar& s) {
  if (s.isBool()) return Argument(s.toDouble() != 0);
  if (s.isIntegral()) return Argument(int64_t(s.toDouble()));
  return Argument(s.toDouble());
}

bool sameAsDefault(const ArgSpec& spec, const Value& v) {
  if (!spec.hasDefault) return false;
  if (v.isNone() || spec.defaultValue.isNone()) return v.isNone() && spec.defaultValue.isNone();
  return v.repr() == spec.defaultValue.repr();
}

bool hasTensorArgument(const OpSchema& s, const Stack& stack) {
  for (size_t i = 0; i < s.args.size(); ++i) {
    const Value& v = stack[i];
    if (v.isTensor() || (v.isTensorList() && !v.toTensorList().empty())) return true;
    if (s.args[i].type == ArgType::OptionalTensorList && !v.isNone()) return true;
  }
  return false;
}

} // namespace

bool needsDecomposition(OpId op, DecomposeTo level) {
  uint32_t tags = Dispatcher::instance().schema(op).tags;
  switch (level) {
  case DecomposeTo::None:
    return false;
  case DecomposeTo::CoreAten:
    // copy_ stays: it is how an in-place op writes back into a graph input at the ATen level
    // (as after PyTorch's functionalization); only the Prims level turns it into copy_to.
    if (op == OpId::copy_) return false;
    return !(tags & (kTagCore | kTagPrims));
  case DecomposeTo::Prims:
    return !(tags & kTagPrims);
  }
  return false;
}

Tensor makeFake(const Tensor& real) {
  Tensor fake = Tensor::emptyStrided(real.sizes(), real.strides(), real.dtype(),
                                     Device(DeviceType::Meta));
  fake.impl()->requiresGrad = real.requiresGrad();
  fake.impl()->isInference = real.impl()->isInference; // x.is_inference() reads the fake
  return fake;
}

OpRecorder::OpRecorder(Graph& graph) : graph_(graph) {}

OpRecorder::~OpRecorder() = default;

void OpRecorder::bind(const Tensor& fake, Node* node, Device device) {
  nodes_[fake.impl()] = Bound{fake, node, device};
  noteDevice(fake, device);
}

void OpRecorder::noteDevice(const Tensor& fake, Device device) {
  if (fake.dim() == 0) return; // (a CPU scalar tensor may mix with any device's)
  lastDevice_ = device;
  if (std::find(devicesSeen_.begin(), devicesSeen_.end(), device) == devicesSeen_.end())
    devicesSeen_.push_back(device);
}

Device OpRecorder::factoryDeviceOfMeta() const {
  // Library code running on fakes asked for a tensor on `x.device` (meta): the values of the
  // graph live on one device, or else the one of the value recorded last.
  return devicesSeen_.size() == 1 ? devicesSeen_[0] : lastDevice_;
}

Node* OpRecorder::nodeOf(const Tensor& fake) const {
  auto it = nodes_.find(fake.impl());
  return it == nodes_.end() ? nullptr : it->second.node;
}

void OpRecorder::eraseUnreadProvisional() {
  std::unordered_set<Node*> erased;
  bool all = true;
  auto erase = [&](Node* n) {
    if (n->isOp()) --numRecorded_;
    erased.insert(n);
    graph_.erase(n);
  };
  for (auto it = provisional_.rbegin(); it != provisional_.rend(); ++it) {
    if ((*it)->target() == "kiln._C._set_grad_enabled") continue;
    if ((*it)->users().empty()) erase(*it);
    else all = false;
  }
  if (all)
    for (Node* n : provisional_)
      if (!erased.count(n)) erase(n);
  provisional_.clear();
  for (auto it = nodes_.begin(); it != nodes_.end();)
    it = erased.count(it->second.node) ? nodes_.erase(it) : std::next(it);
}

Node* OpRecorder::bindAlias(const Tensor& t) {
  if (nodes_.count(t.impl())) return nullptr;
  auto it = aliasOf(t);
  if (it == nodes_.end()) return nullptr;
  Bound alias{t, it->second.node, it->second.device};
  nodes_[t.impl()] = std::move(alias);
  return nodes_[t.impl()].node;
}

Device OpRecorder::deviceOf(const Tensor& fake) const {
  auto it = nodes_.find(fake.impl());
  return it == nodes_.end() ? Device() : it->second.device;
}

const OpRecorder* OpRecorder::current() { return gCurrent; }

OpRecorder* OpRecorder::active() { return gCurrent; }

Node* OpRecorder::recordCall(const std::string& target, std::vector<Argument> args) {
  if (beforeRecord) beforeRecord();
  Node* node = graph_.callFunction(target, std::move(args));
  node->meta.loc = location;
  ++numRecorded_;
  return node;
}

void OpRecorder::standIn(const Tensor& real, const Tensor& fake) {
  KILN_CHECK(nodes_.count(fake.impl()), "standIn: the fake standing for a real tensor is not bound");
  standIns_[real.impl()] = {real, fake};
}

Tensor OpRecorder::readable(const Tensor& t) {
  if (!t.isMeta() || !gCurrent || !gCurrent->valuesOf) return t;
  Tensor real = gCurrent->valuesOf(t);
  return real.defined() ? real : t;
}

bool OpRecorder::fakeDevice(const Tensor& fake, DeviceType& device) {
  if (!gCurrent) return false;
  auto it = gCurrent->nodes_.find(fake.impl());
  if (it == gCurrent->nodes_.end()) return false;
  device = it->second.device.type;
  return true;
}

OpRecorder::Scope::Scope(OpRecorder& r) : saved_(gCurrent) {
  // (Re)claimed on every scope: the Tracing key has one fallback, and tests install others.
  Dispatcher::instance().registerFallback(DispatchKey::Tracing, &OpRecorder::fallback);
  autocast::setFakeDeviceResolver(&OpRecorder::fakeDevice);
  gCurrent = &r;
  localDispatchKeySet().included = localDispatchKeySet().included | DispatchKeySet(DispatchKey::Tracing);
}

OpRecorder::Scope::~Scope() {
  gCurrent = saved_;
  if (!saved_)
    localDispatchKeySet().included =
        localDispatchKeySet().included - DispatchKeySet(DispatchKey::Tracing);
}

void OpRecorder::fallback(OpId op, DispatchKeySet remaining, Stack& stack) {
  if (!gCurrent) return Dispatcher::instance().redispatch(op, remaining, stack);
  gCurrent->record(op, stack);
}

// The node standing for tensor t, replacing t by its fake when t is a real tensor.
Node* OpRecorder::nodeFor(Tensor& t, Device& device) {
  decltype(nodes_)::const_iterator it = nodes_.find(t.impl());
  if (it == nodes_.end() && t.isMeta()) it = aliasOf(t);
  if (auto s = standIns_.find(t.impl()); it == nodes_.end() && s != standIns_.end())
    it = nodes_.find(s->second.second.impl());
  if (it == nodes_.end()) {
    KILN_CHECK(!t.isMeta(), "kiln tracing met a meta tensor that is not part of the graph: ",
               t.describe(), currentOp_ ? strCat(" (an argument of aten.", Dispatcher::instance().schema(*currentOp_).qualifiedName(), ")") : std::string());
    if (!liftTensor)
      throw Error(strCat("kiln tracing met a real tensor that is not an input of the graph: ",
                         t.describe()));
    Node* n = liftTensor(t);
    lifted_.insert(t.impl());
    Tensor fake = makeFake(t);
    bind(fake, n, t.device());
    it = nodes_.find(fake.impl());
  }
  t = it->second.fake;
  if (device.isCpu()) device = it->second.device;
  return it->second.node;
}

Argument OpRecorder::toArgument(Value& v, Device& device) {
  if (v.isNone()) return Argument();
  if (v.isTensor()) {
    Tensor& t = v.toTensor();
    if (t.isWrappedNumber()) return scalarArgument(t.item());
    return Argument(nodeFor(t, device));
  }
  if (v.isTensorList()) {
    std::vector<Tensor> ts = v.toTensorList();
    std::vector<Argument> items;
    for (Tensor& t : ts)
      items.emplace_back(nodeFor(t, device));
    v = Value(std::move(ts));
    return Argument::list(std::move(items));
  }
  if (std::holds_alternative<std::vector<std::optional<Tensor>>>(v.variant())) {
    std::vector<std::optional<Tensor>> ts = v.toOptionalTensorList();
    std::vector<Argument> items;
    for (auto& t : ts) {
      if (t) items.emplace_back(nodeFor(*t, device));
      else items.emplace_back();
    }
    v = Value(std::move(ts));
    return Argument::list(std::move(items));
  }
  if (v.isBool()) return Argument(v.toBool());
  if (v.isInt()) return Argument(v.toInt());
  if (v.isDouble()) return Argument(v.toDouble());
  if (v.isScalar()) return scalarArgument(v.toScalar());
  if (v.isIntList()) {
    std::vector<Argument> items;
    for (int64_t i : v.toIntList())
      items.emplace_back(i);
    return Argument::list(std::move(items));
  }
  if (std::holds_alternative<std::vector<double>>(v.variant())) {
    std::vector<Argument> items;
    for (double d : v.toDoubleList())
      items.emplace_back(d);
    return Argument::list(std::move(items));
  }
  if (std::holds_alternative<ScalarType>(v.variant())) return Argument(v.toScalarType());
  if (std::holds_alternative<Device>(v.variant())) return Argument(v.toDevice());
  return Argument(v.toStringRef());
}

void OpRecorder::runDecomposition(OpId op, Stack& stack) {
  const OpSchema& s = Dispatcher::instance().schema(op);
  // A decomposition that (through others) calls its own op would recurse without end.
  constexpr int kMaxDepth = 64;
  KILN_CHECK(decompositionDepth_ < kMaxDepth, "kiln tracing: decompositions nest deeper than ",
             kMaxDepth, " levels at aten.", s.qualifiedName());
  Device device;
  for (Value& v : stack)
    toArgument(v, device); // binds real tensors met here and puts fakes on the stack
  // The op itself, on the fakes, first: it rejects bad arguments with the op's own errors (so
  // decompositions need not), and its results are what the decomposition must produce.
  const Dispatcher& d = Dispatcher::instance();
  const bool check = d.hasKernel(op, DispatchKey::Meta) || d.hasKernel(op, DispatchKey::CompositeImplicit);
  Stack expected = stack;
  for (size_t i = 0; i < s.args.size(); ++i) // the check runs on meta, like everything traced
    if (s.args[i].type == ArgType::Device && !expected[i].isNone())
      expected[i] = Value(Device(DeviceType::Meta));
  if (check) {
    ExcludeDispatchKeyGuard noTracing(DispatchKey::Tracing);
    d.call(op, expected);
  }
  for (size_t i = 0; i < s.args.size(); ++i)
    if (s.args[i].type == ArgType::Device && !stack[i].isNone()) device = stack[i].toDevice();
  {
    // Restored however the decomposition ends (it may raise, as the op would).
    struct Nesting {
      OpRecorder& r;
      std::optional<Device> saved;
      Nesting(OpRecorder& rec, Device d) : r(rec), saved(rec.decompositionDevice_) {
        r.decompositionDevice_ = d;
        ++r.decompositionDepth_;
      }
      ~Nesting() {
        r.decompositionDevice_ = saved;
        --r.decompositionDepth_;
      }
    } nesting(*this, device);
    decompositionOf(op)(stack);
  }
  auto tensors = [](const Stack& st) {
    std::vector<Tensor> out;
    for (const Value& v : st) {
      if (v.isTensor()) out.push_back(v.toTensor());
      if (v.isTensorList())
        for (const Tensor& t : v.toTensorList())
          out.push_back(t);
    }
    return out;
  };
  if (!check) return;
  std::vector<Tensor> got = tensors(stack), want = tensors(expected);
  KILN_CHECK(got.size() == want.size(), "kiln tracing: the decomposition of aten.",
             s.qualifiedName(), " returned ", got.size(), " tensors instead of ", want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    KILN_CHECK(nodes_.count(got[i].impl()), "kiln tracing: the decomposition of aten.",
               s.qualifiedName(), " returned a tensor that no traced op made");
    KILN_CHECK(got[i].dtype() == want[i].dtype() &&
                   DimVector(got[i].sizes()) == DimVector(want[i].sizes()),
               "kiln tracing: the decomposition of aten.", s.qualifiedName(), " made ",
               scalarTypeShortName(got[i].dtype()), got[i].shapeString(), " where the op makes ",
               scalarTypeShortName(want[i].dtype()), want[i].shapeString());
  }
}

void OpRecorder::record(OpId op, Stack& stack) {
  const OpSchema& s = Dispatcher::instance().schema(op);
  // Inside a decomposition, a factory given a fake's device (meta) makes its tensor where the
  // decomposed op's result lives (also when the factory decomposes in turn).
  if (decompositionDevice_)
    for (size_t i = 0; i < s.args.size(); ++i)
      if (s.args[i].type == ArgType::Device && !stack[i].isNone() && stack[i].toDevice().isMeta())
        stack[i] = decompositionDevice_->isCpu() && s.args[i].optional ? Value()
                                                                        : Value(*decompositionDevice_);
  if (beforeRecord) beforeRecord();
  if (needsDecomposition(op, decompose) && decompositionOf(op))
    return runDecomposition(op, stack);
  // Under autograd (AOT's joint trace), an op with no derivative formula of its own (a
  // composite: its backward is its parts') runs its decomposition with tracing on, so that the
  // parts autograd saves for the backward are nodes of the graph.
  if (decomposeOpsWithoutFormula && !Dispatcher::instance().hasKernel(op, DispatchKey::Autograd) &&
      decompositionOf(op))
    return runDecomposition(op, stack);
  const bool factory = !hasTensorArgument(s, stack);
  Device device; // of the result: the first tensor input's, or the one a factory names

  std::vector<Argument> args;
  Kwargs kwargs;
  size_t lastPositional = 0; // positional arguments after this one all have their defaults
  std::vector<Argument> converted(s.args.size());
  for (size_t i = 0; i < s.args.size(); ++i) {
    // A meta device here was read off a fake (`x.to(y.device)` inside library code): the value
    // it stands for lives where the op's tensor inputs live.
    if (s.args[i].type == ArgType::Device && !stack[i].isNone() && stack[i].toDevice().isMeta())
      stack[i] = Value(factory ? factoryDeviceOfMeta() : device);
    currentOp_ = op;
    converted[i] = toArgument(stack[i], device);
    currentOp_.reset();
    if (!s.args[i].kwargOnly && !sameAsDefault(s.args[i], stack[i])) lastPositional = i + 1;
  }
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (!s.args[i].kwargOnly) {
      if (i < lastPositional) args.push_back(converted[i]);
    } else if (!sameAsDefault(s.args[i], stack[i])) {
      kwargs.emplace_back(s.args[i].name, converted[i]);
    }
  }
  // Everything runs on meta while tracing (factories, copies to a device); the node keeps the
  // device the program asked for.
  for (size_t i = 0; i < s.args.size(); ++i)
    if (s.args[i].type == ArgType::Device && (factory || !stack[i].isNone())) {
      if (!stack[i].isNone()) device = stack[i].toDevice();
      stack[i] = Value(Device(DeviceType::Meta));
    }

  {
    // Ops that this op's kernel calls are part of it, not nodes of their own.
    ExcludeDispatchKeyGuard noTracing(DispatchKey::Tracing);
    Dispatcher::instance().call(op, stack);
  }

  Node* node = graph_.callFunction(op, std::move(args), std::move(kwargs));
  node->meta.loc = location;
  ++numRecorded_;

  std::vector<Tensor> results;
  bool tuple = s.returns.size() != 1 || stack[0].isTensorList();
  for (size_t r = 0; r < stack.size(); ++r) {
    const Value& v = stack[r];
    if (v.isTensor()) {
      results.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      for (const Tensor& t : v.toTensorList())
        results.push_back(t);
    } else {
      throw NotImplementedError(strCat("kiln.compile cannot capture ", s.ns, ".", s.qualifiedName(),
                                       ": it returns a Python value that depends on tensor data"));
    }
  }
  for (Tensor& t : results)
    if (t.defined() && !t.isMeta()) t = makeFake(t); // ops without a device argument made a real tensor
  // An undefined result (a backward op's gradient that its output_mask left out) has no node;
  // its type is the empty tuple.
  if (!tuple) {
    if (!results[0].defined()) {
      node->meta.type = Type::tuple({});
      return;
    }
    node->meta.type = Type(TensorType::of(results[0], device));
    bindResult(results[0], node, device);
    stack[0] = Value(results[0]);
    return;
  }
  std::vector<Type> types;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].defined()) {
      types.push_back(Type::tuple({}));
      continue;
    }
    types.emplace_back(TensorType::of(results[i], device));
    Node* item = graph_.callFunction("operator.getitem", {Argument(node), Argument(int64_t(i))});
    item->meta.type = types.back();
    item->meta.loc = location;
    bindResult(results[i], item, device);
  }
  node->meta.type = Type::tuple(std::move(types));
  if (s.returns.size() == 1) {
    stack[0] = Value(std::move(results));
  } else {
    for (size_t i = 0; i < results.size(); ++i)
      stack[i] = Value(results[i]);
  }
}

// A fake of the same storage with the same geometry stands for the same value: the autograd
// engine keeps a saved output as a new tensor over the output's storage (without its history).
std::unordered_map<const TensorImpl*, OpRecorder::Bound>::const_iterator
OpRecorder::aliasOf(const Tensor& t) const {
  if (!t.storage()) return nodes_.end();
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
    const Tensor& f = it->second.fake;
    if (f.storage().get() == t.storage().get() && f.storageOffset() == t.storageOffset() &&
        f.dtype() == t.dtype() && DimVector(f.sizes()) == DimVector(t.sizes()) &&
        DimVector(f.strides()) == DimVector(t.strides()))
      return it;
  }
  return nodes_.end();
}

void OpRecorder::bindResult(const Tensor& fake, Node* node, Device device) {
  // An in-place op returns its input: later uses of that value read the mutated node.
  nodes_[fake.impl()] = Bound{fake, node, device};
  noteDevice(fake, device);
}

} // namespace kiln::compiler
