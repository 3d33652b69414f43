// GraphTracer: replays a graph's ops on fakes under a (decomposing) OpRecorder.
#include "compiler/GraphTracer.h"

#include <cstdint>
#include <unordered_map>

#include "ir/OpTarget.h"
#include "ir/SchemaBinding.h"
#include "runtime/Dispatcher.h"
#include "runtime/Error.h"
#include "runtime/autograd/Engine.h"

namespace kiln::compiler {

namespace {

std::unordered_map<std::string, ExternalTarget>& externalTargets() {
  static std::unordered_map<std::string, ExternalTarget> targets;
  return targets;
}

// What an old node evaluates to while retracing: a fake tensor, or a tuple of them.
struct Traced {
  Value value;
  std::vector<Traced> elements;
  bool isTuple = false;
};

class GraphTracer final : public ArgumentValues {
public:
  GraphTracer(const Graph& old, DecomposeTo level) : old_(old), graph_(old.name()), recorder_(graph_) {
    recorder_.decompose = level;
    recorder_.tracesCustomFunctions = true;
  }

  void decomposeComposites(bool on) { recorder_.decomposeOpsWithoutFormula = on; }

  Graph run() {
    // The graph holds the casts of any autocast it was captured under: retraced, it is not
    // cast again (a compiled function called inside `with autocast()`).
    ExcludeDispatchKeyGuard noAutocast(DispatchKey::Autocast);
    OpRecorder::Scope scope(recorder_);
    const Node* out = body();
    if (out) graph_.output(outputArgument(*out, out->args().empty() ? Argument() : out->args()[0]));
    return std::move(graph_);
  }

  // The forward (grad mode on, placeholders i with requiresGrad[i] as leaves that require
  // grad), then the backward from the outputs that require grad, all recorded (see traceJoint).
  JointGraph runJoint(const std::vector<bool>& requiresGrad) {
    requiresGrad_ = requiresGrad;
    joint_ = true;
    recorder_.decomposeOpsWithoutFormula = true;
    ExcludeDispatchKeyGuard noAutocast(DispatchKey::Autocast);
    OpRecorder::Scope scope(recorder_);
    const bool gradMode = GradMode::isEnabled();
    GradMode::setEnabled(true);
    struct Restore {
      bool on;
      ~Restore() { GradMode::setEnabled(on); }
    } restore{gradMode};

    const Node* out = body();
    if (!out || out->args().empty()) throw Error("trace_joint: the graph has no output");
    const Argument& result = out->args()[0];
    std::vector<Argument> items = result.isSequence() ? result.items() : std::vector<Argument>{result};
    JointGraph joint;
    std::vector<Argument> outputs;
    std::vector<Tensor> roots, tangents;
    Node* lastInput = nullptr;
    for (Node* n : graph_.nodes())
      if (n->opcode() == Opcode::Placeholder || n->opcode() == Opcode::GetAttr) lastInput = n;
    for (const Argument& item : items) {
      if (!item.isNode()) fail(*out, "trace_joint: every output must be a tensor");
      const Traced& t = traced(*out, item.toNode());
      if (t.isTuple || !t.value.isTensor()) fail(*out, "trace_joint: every output must be a tensor");
      outputs.push_back(tracedArgument(*out, t));
      const Tensor& fake = t.value.toTensor();
      joint.tangentFor.push_back(fake.requiresGrad());
      if (!fake.requiresGrad()) continue;
      // The gradient flowing into this output: a new placeholder after the inputs.
      Node* ph = graph_.placeholder(graph_.uniqueName("tangents_" + std::to_string(tangents.size() + 1)));
      if (lastInput) graph_.moveAfter(ph, lastInput);
      lastInput = ph;
      Tensor tangent = Tensor::empty(fake.sizes(), fake.dtype(), Device(DeviceType::Meta));
      ph->meta.type = Type(TensorType::of(tangent, recorder_.deviceOf(fake)));
      recorder_.bind(tangent, ph, recorder_.deviceOf(fake));
      roots.push_back(fake);
      tangents.push_back(tangent);
    }
    joint.numForwardOutputs = outputs.size();
    std::vector<Tensor> leaves;
    for (size_t i = 0; i < inputFakes_.size(); ++i)
      if (i < requiresGrad.size() && requiresGrad[i]) {
        leaves.push_back(inputFakes_[i]);
        joint.gradInputs.push_back(i);
      }
    std::vector<Tensor> grads;
    if (!roots.empty() && !leaves.empty()) {
      GradMode::setEnabled(false);
      autograd::BackwardOptions options;
      options.accumulateGrad = false;
      options.allowUnused = true;
      grads = autograd::runBackward(roots, tangents, leaves, options);
    }
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (i < grads.size() && grads[i].defined()) {
        Node* node = recorder_.nodeOf(grads[i]);
        if (!node) throw Error("trace_joint: a gradient was made by no traced op");
        outputs.emplace_back(node);
      } else {
        outputs.emplace_back(); // None: no gradient reaches this input
      }
    }
    graph_.output(Argument::tuple(std::move(outputs)));
    joint.graph = std::move(graph_);
    return joint;
  }

private:
  // Traces every node but the output, which it returns (null when there is none).
  const Node* body() {
    const Node* out = nullptr;
    for (Node* n : old_.nodes()) {
      recorder_.location = n->meta.loc;
      switch (n->opcode()) {
      case Opcode::Placeholder:
      case Opcode::GetAttr:
        input(*n);
        break;
      case Opcode::Output:
        out = n;
        break;
      default:
        call(*n);
      }
    }
    return out;
  }

  [[noreturn]] void fail(const Node& n, const std::string& msg) const override {
    throw Error(strCat("retrace: %", n.name(), ": ", msg));
  }

  Tensor fakeOf(const Node& n, const TensorType& tt) const {
    if (!tt.isStatic())
      fail(n, "type " + tt.str() + " has symbolic sizes; retrace handles static sizes only");
    std::vector<int64_t> sizes, strides;
    for (const IndexExpr& s : tt.sizes)
      sizes.push_back(*s.constant());
    Device meta(DeviceType::Meta);
    if (!tt.strides) return Tensor::empty(sizes, tt.dtype, meta);
    for (const IndexExpr& s : *tt.strides)
      strides.push_back(*s.constant());
    return Tensor::emptyStrided(sizes, strides, tt.dtype, meta);
  }

  void input(const Node& n) {
    if (!n.meta.type || !n.meta.type->isTensor())
      fail(n, std::string(opcodeName(n.opcode())) + " needs a tensor type to be retraced, has " +
                  (n.meta.type ? n.meta.type->str() : std::string("none")));
    Node* copy = graph_.create(n.opcode(), n.target(), n.args(), n.kwargs(), n.name());
    copy->meta = n.meta;
    Tensor fake = fakeOf(n, n.meta.type->tensor());
    if (inputFakes_.size() < requiresGrad_.size() && requiresGrad_[inputFakes_.size()])
      fake.impl()->requiresGrad = true;
    inputFakes_.push_back(fake);
    recorder_.bind(fake, copy, n.meta.type->tensor().device);
    env_[&n] = Traced{Value(fake), {}, false};
  }

  void call(const Node& n) {
    if (n.opcode() == Opcode::CallFunction && n.target() == "kiln._C._set_grad_enabled") {
      // The joint trace follows the graph's grad mode (what it computes under no_grad is not
      // differentiated); a plain retrace copies the node and does not depend on it.
      if (joint_) {
        if (n.args().size() == 1 && n.args()[0].kind() == Argument::Kind::Bool)
          GradMode::setEnabled(n.args()[0].toBool());
        return;
      }
      Node* copy = graph_.callFunction(n.target(), n.args(), n.kwargs());
      copy->meta = n.meta;
      return;
    }
    if (n.opcode() == Opcode::CallFunction && n.target() == "aot.input_value") {
      inputValue(n);
      return;
    }
    if (n.opcode() == Opcode::CallFunction && n.target() == "operator.getitem" &&
        n.args().size() == 2 && n.args()[0].isNode() &&
        n.args()[1].kind() == Argument::Kind::Int) {
      const Traced& seq = traced(n, n.args()[0].toNode());
      int64_t i = n.args()[1].toInt(), size = int64_t(seq.elements.size());
      if (!seq.isTuple || i < -size || i >= size) fail(n, "getitem of a value that has no such element");
      env_[&n] = seq.elements[size_t(i < 0 ? i + size : i)];
      return;
    }
    if (n.opcode() == Opcode::CallFunction) {
      auto ext = externalTargets().find(n.target());
      if (ext != externalTargets().end()) {
        external(n, ext->second);
        return;
      }
    }
    OpId op = resolveCall(n);
    if (op == OpId::NumOps)
      fail(n, strCat("cannot retrace ", opcodeName(n.opcode()), " ", n.target(),
                     ": only ops of the table, operator.getitem and kiln._C._set_grad_enabled"));
    const OpSchema& s = opSchema(op);
    std::string error;
    auto bound = bindArguments(s, n.args(), n.kwargs(), &error);
    if (!bound) fail(n, opTarget(op) + " " + error);
    Stack stack;
    for (size_t i = 0; i < s.args.size(); ++i) {
      const ArgSpec& spec = s.args[i];
      const Argument* a = (*bound)[i];
      stack.push_back(a ? argumentValue(n, spec, *a, *this) : spec.hasDefault ? spec.defaultValue : Value());
    }
    Dispatcher::instance().call(op, stack);
    auto single = [](Value v) {
      Traced t;
      if (v.isTensorList()) {
        t.isTuple = true;
        for (const Tensor& e : v.toTensorList())
          t.elements.push_back(Traced{Value(e), {}, false});
        return t;
      }
      t.value = std::move(v);
      return t;
    };
    if (s.returns.size() == 1 && !stack.empty()) {
      env_[&n] = single(std::move(stack[0]));
      return;
    }
    Traced tuple;
    tuple.isTuple = true;
    for (Value& v : stack)
      tuple.elements.push_back(single(std::move(v)));
    env_[&n] = std::move(tuple);
  }

  // An external target's node: its code run on the fakes (its ops recorded), or at level None
  // outside the joint trace the node itself, copied, its results fakes of its types.
  void external(const Node& n, const ExternalTarget& run) {
    if (!n.kwargs().empty()) fail(n, n.target() + " takes no keyword arguments");
    std::vector<Value> args;
    std::vector<Argument> copied;
    for (const Argument& a : n.args()) {
      if (a.isNode()) {
        args.emplace_back(tensor(n, *a.toNode()));
        copied.push_back(tracedArgument(n, traced(n, a.toNode())));
      } else if (a.kind() == Argument::Kind::Int) {
        args.emplace_back(a.toInt());
        copied.push_back(a);
      } else {
        fail(n, n.target() + " takes tensors and ints");
      }
    }
    Traced tuple;
    tuple.isTuple = true;
    if (!joint_ && recorder_.decompose == DecomposeTo::None) {
      if (!n.meta.type || !n.meta.type->isTuple()) fail(n, n.target() + " needs a tuple type to be retraced");
      Node* copy = graph_.callFunction(n.target(), std::move(copied));
      copy->meta = n.meta;
      int64_t i = 0;
      for (const Type& t : n.meta.type->elements()) {
        if (!t.isTensor()) fail(n, n.target() + " returns a value that is not a tensor");
        Tensor fake = fakeOf(n, t.tensor());
        Node* item = graph_.callFunction("operator.getitem", {Argument(copy), Argument(i++)});
        item->meta.type = t;
        item->meta.loc = n.meta.loc;
        recorder_.bind(fake, item, t.tensor().device);
        tuple.elements.push_back(Traced{Value(fake), {}, false});
      }
    } else {
      for (Tensor& t : run(args)) {
        recorder_.bindAlias(t); // an output that is an input, with the Function's history
        tuple.elements.push_back(Traced{Value(std::move(t)), {}, false});
      }
    }
    env_[&n] = std::move(tuple);
  }

  // aot.input_value(input, value): the forward reads `value` (the input's new value, written
  // under no_grad) while autograd sees `input` itself, as eagerly a write under no_grad changes
  // a tensor's data and keeps its history. The fake is an unrecorded alias of the input's fake
  // (an identity edge to it) bound to the value's node.
  void inputValue(const Node& n) {
    if (n.args().size() != 2 || !n.args()[0].isNode() || !n.args()[1].isNode())
      fail(n, "aot.input_value takes (input, value)");
    Tensor input = tensor(n, *n.args()[0].toNode()), value = tensor(n, *n.args()[1].toNode());
    if (input.sizes() != value.sizes() || input.strides() != value.strides() || input.dtype() != value.dtype())
      fail(n, "aot.input_value: the value's layout differs from the input's");
    Tensor identity;
    {
      ExcludeDispatchKeyGuard notRecorded(DispatchKey::Tracing);
      const bool gradMode = GradMode::isEnabled();
      GradMode::setEnabled(true);
      Stack stack{Value(input)};
      Dispatcher::instance().call(OpId::alias, stack);
      GradMode::setEnabled(gradMode);
      identity = stack[0].toTensor();
    }
    Node* node = recorder_.nodeOf(value);
    if (!node) fail(n, "aot.input_value: the value was made by no traced op");
    recorder_.bind(identity, node, recorder_.deviceOf(value));
    env_[&n] = Traced{Value(identity), {}, false};
  }

  const Traced& traced(const Node& n, const Node* in) const {
    auto it = env_.find(in);
    if (it == env_.end()) fail(n, "uses %" + in->name() + ", which has no value before this node");
    return it->second;
  }

  // ArgumentValues: the values the retraced nodes computed.
  Tensor tensor(const Node& n, const Node& in) const override {
    const Traced& t = traced(n, &in);
    if (t.isTuple || !t.value.isTensor()) fail(n, "%" + in.name() + " is not a tensor");
    return t.value.toTensor();
  }
  std::vector<Tensor> tensors(const Node& n, const Node& in) const override {
    const Traced& t = traced(n, &in);
    if (!t.isTuple) fail(n, "%" + in.name() + " is not a tuple of tensors");
    std::vector<Tensor> list;
    for (const Traced& e : t.elements)
      list.push_back(e.value.toTensor());
    return list;
  }
  Value number(const Node& n, const Node& in) const override {
    fail(n, "%" + in.name() + " is a computed number; retrace needs constants");
  }

  // An output argument with each old node replaced by the node now standing for its value.
  Argument outputArgument(const Node& n, const Argument& a) const {
    if (a.isNode()) return tracedArgument(n, traced(n, a.toNode()));
    if (a.kind() == Argument::Kind::List || a.kind() == Argument::Kind::Tuple) {
      std::vector<Argument> items;
      for (const Argument& item : a.items())
        items.push_back(outputArgument(n, item));
      return a.kind() == Argument::Kind::List ? Argument::list(std::move(items))
                                              : Argument::tuple(std::move(items));
    }
    return a;
  }

  Argument tracedArgument(const Node& n, const Traced& t) const {
    if (t.isTuple) {
      std::vector<Argument> items;
      for (const Traced& e : t.elements)
        items.push_back(tracedArgument(n, e));
      return Argument::tuple(std::move(items));
    }
    if (!t.value.isTensor()) fail(n, "returns a value that is not a tensor");
    Node* node = recorder_.nodeOf(t.value.toTensor());
    if (!node) fail(n, "returns a tensor no traced node made");
    return Argument(node);
  }

  const Graph& old_;
  Graph graph_;
  OpRecorder recorder_;
  std::unordered_map<const Node*, Traced> env_;
  std::vector<bool> requiresGrad_; // per placeholder/get_attr, in order (traceJoint)
  bool joint_ = false;
  std::vector<Tensor> inputFakes_; // the fakes of the placeholders and get_attrs, in order
};

} // namespace

void registerExternalTarget(const std::string& target, ExternalTarget run) {
  externalTargets()[target] = std::move(run);
}

Graph retrace(const Graph& g, DecomposeTo level, bool decomposeComposites) {
  GraphTracer tracer(g, level);
  tracer.decomposeComposites(decomposeComposites);
  return tracer.run();
}

JointGraph traceJoint(const Graph& g, const std::vector<bool>& requiresGrad) {
  return GraphTracer(g, DecomposeTo::None).runJoint(requiresGrad);
}

} // namespace kiln::compiler
