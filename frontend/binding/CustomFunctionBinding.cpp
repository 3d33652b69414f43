// A custom kiln.autograd.Function under kiln.compile: its capture as one node, and the code that
// retrace and the joint trace run for that node.
#include "frontend/binding/CustomFunctionBinding.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <unordered_set>

#include "compiler/GraphTracer.h"
#include "compiler/OpRecorder.h"
#include "frontend/binding/PythonConvert.h"
#include "ir/OpTarget.h"
#include "runtime/Error.h"
#include "runtime/autograd/Engine.h"

namespace nb = nanobind;

namespace kiln::python {

namespace {

using compiler::OpRecorder;

constexpr const char* kApplyTarget = "kiln.autograd.function.apply_captured";

nb::object wrap(const Tensor& t) { return nb::steal(wrapTensor(t)); }

struct GradModeGuard {
  bool saved = GradMode::isEnabled();
  explicit GradModeGuard(bool on) { GradMode::setEnabled(on); }
  ~GradModeGuard() { GradMode::setEnabled(saved); }
};

// Whether a recorded op of `g` writes into one of its placeholders (through views of it):
// the capture's node is a pure function of its inputs, so such a Function breaks the graph.
bool writesAPlaceholder(const Graph& g) {
  auto root = [](Node* n) {
    while (n->opcode() == Opcode::CallFunction && !n->args().empty() && n->args()[0].isNode() &&
           ((n->isOp() && opSchema(n->op()).hasTag(kTagView)) || n->target() == "operator.getitem"))
      n = n->args()[0].toNode();
    return n;
  };
  for (Node* n : g.nodes()) {
    if (!n->isOp()) continue;
    const OpSchema& s = opSchema(n->op());
    for (size_t i = 0; i < s.args.size() && i < n->args().size(); ++i)
      if (s.args[i].mutated && n->args()[i].isNode() && root(n->args()[i].toNode())->opcode() == Opcode::Placeholder)
        return true;
  }
  return false;
}

// A real tensor the Function's code reads by itself (a module's parameter): `input` is the
// index of the argument standing for the same graph value, -1 when it becomes an extra input.
struct Lifted {
  Tensor real;
  int input;
  Node* outerNode;
};

// Runs the application (`run(tensors, speculate)`) on fresh fakes of the inputs under a scratch
// recorder, then its backward from every output that requires grad: either failing means the
// Function is not traceable (a break). Returns the real tensors its code read by itself.
std::vector<Lifted> speculate(OpRecorder& outer, const std::vector<Tensor>& inputs,
                              const std::vector<Node*>& inputNodes, nb::handle run) {
  std::vector<Lifted> lifted;
  Graph scratch("custom_function");
  OpRecorder rec(scratch);
  rec.tracesCustomFunctions = true;
  rec.decomposeOpsWithoutFormula = true; // as the joint trace: what autograd saves is a node
  std::vector<Node*> placeholders;
  nb::list fresh;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Node* p = scratch.placeholder(scratch.uniqueName("input"));
    Tensor f = compiler::makeFake(inputs[i]);
    rec.bind(f, p, outer.deviceOf(inputs[i]));
    placeholders.push_back(p);
    fresh.append(wrap(f));
  }
  rec.liftTensor = [&](const Tensor& real) -> Node* {
    if (!outer.liftTensor)
      throw NotImplementedError("it reads a tensor that is not an input of the graph: " + real.describe());
    Node* on = outer.liftTensor(real);
    for (size_t i = 0; i < inputNodes.size(); ++i)
      if (inputNodes[i] == on) {
        lifted.push_back({real, int(i), on});
        return placeholders[i];
      }
    lifted.push_back({real, -1, on});
    return scratch.placeholder(scratch.uniqueName("lifted"));
  };
  OpRecorder::Scope scope(rec);
  GradModeGuard gradOn(true);
  nb::object outputs = run(fresh, true);
  std::vector<Tensor> roots, tangents, leaves;
  for (nb::handle o : outputs) {
    const Tensor& t = unwrapTensor(o.ptr());
    if (!t.requiresGrad()) continue;
    Tensor tangent = Tensor::empty(t.sizes(), t.dtype(), Device(DeviceType::Meta));
    rec.bind(tangent, scratch.placeholder(scratch.uniqueName("tangent")));
    roots.push_back(t);
    tangents.push_back(tangent);
  }
  if (writesAPlaceholder(scratch)) throw NotImplementedError("its forward writes into an input in place");
  for (nb::handle f : fresh)
    if (unwrapTensor(f.ptr()).requiresGrad()) leaves.push_back(unwrapTensor(f.ptr()));
  if (!roots.empty() && !leaves.empty()) {
    GradModeGuard gradOff(false);
    autograd::BackwardOptions options;
    options.accumulateGrad = false;
    options.allowUnused = true;
    autograd::runBackward(roots, tangents, leaves, options);
  }
  return lifted;
}

// The application on the capture's own fakes: outputs whose history is the Function's backward
// node, as eagerly. Its forward's ops are recorded into the capture's graph, provisionally: only
// autograd run while capturing (a kiln.func transform over the Function) reads them.
std::vector<Tensor> applyProvisionally(OpRecorder& outer, const std::vector<Tensor>& inputs, nb::handle run) {
  struct Restore {
    OpRecorder& r;
    ~Restore() { r.tracesCustomFunctions = false; }
  } restore{outer};
  outer.tracesCustomFunctions = true;
  std::unordered_set<Node*> before;
  for (Node* n : outer.graph().nodes())
    before.insert(n);
  nb::list args;
  for (const Tensor& t : inputs)
    args.append(wrap(t));
  auto markNewNodes = [&] {
    for (Node* n : outer.graph().nodes())
      if (!before.count(n)) outer.markProvisional(n);
  };
  nb::object outputs;
  try {
    outputs = run(args, false);
  } catch (...) {
    markNewNodes(); // a break follows: nothing reads what the failed run recorded
    throw;
  }
  markNewNodes();
  std::vector<Tensor> out;
  for (nb::handle o : outputs)
    out.push_back(unwrapTensor(o.ptr()));
  return out;
}

// (output fakes, [(real tensor, index of the node's tensor argument standing for it)]).
nb::tuple captureApplication(int64_t key, nb::handle inputList, nb::handle run, const std::string& name) {
  OpRecorder* outer = OpRecorder::active();
  if (!outer || outer->tracesCustomFunctions)
    throw Error("_capture_custom_function: called outside kiln.compile's capture");
  std::vector<Tensor> inputs;
  std::vector<Node*> inputNodes;
  for (nb::handle h : inputList) {
    const Tensor& t = unwrapTensor(h.ptr());
    Node* n = outer->nodeOf(t);
    if (!n) throw NotImplementedError("custom autograd.Function " + name + ": an argument is a tensor the graph does not know");
    inputs.push_back(t);
    inputNodes.push_back(n);
  }
  std::vector<Lifted> lifted;
  std::vector<Tensor> outputs;
  try {
    lifted = speculate(*outer, inputs, inputNodes, run);
    outputs = applyProvisionally(*outer, inputs, run);
  } catch (nb::python_error& e) {
    std::string type = Py_TYPE(e.value().ptr())->tp_name;
    std::string message = nb::cast<std::string>(nb::str(e.value()));
    throw NotImplementedError("custom autograd.Function " + name + " cannot be traced (" + type + ": " + message +
                              "): it runs eagerly, with its backward");
  } catch (const std::exception& e) {
    throw NotImplementedError("custom autograd.Function " + name + " cannot be traced (" + e.what() +
                              "): it runs eagerly, with its backward");
  }
  std::vector<Argument> args{Argument(key)};
  for (Node* n : inputNodes)
    args.emplace_back(n);
  nb::list standIns;
  int64_t extra = int64_t(inputs.size());
  for (const Lifted& l : lifted) {
    if (l.input >= 0) {
      standIns.append(nb::make_tuple(wrap(l.real), l.input));
      continue;
    }
    args.emplace_back(l.outerNode);
    standIns.append(nb::make_tuple(wrap(l.real), extra++));
  }
  Device device = inputs.empty() ? Device() : outer->deviceOf(inputs[0]);
  Node* node = outer->recordCall(kApplyTarget, std::move(args));
  std::vector<Type> types;
  nb::list result;
  for (size_t i = 0; i < outputs.size(); ++i) {
    types.emplace_back(TensorType::of(outputs[i], device));
    Node* item = outer->graph().callFunction("operator.getitem", {Argument(node), Argument(int64_t(i))});
    item->meta.type = types.back();
    item->meta.loc = node->meta.loc;
    outer->bind(outputs[i], item, device);
    result.append(wrap(outputs[i]));
  }
  node->meta.type = Type::tuple(std::move(types));
  return nb::make_tuple(result, standIns);
}

} // namespace

void registerCustomFunctionCapture(nb::module_& m) {
  m.def(
      "_custom_function_captured",
      [] {
        const OpRecorder* r = OpRecorder::current();
        return r && !r->tracesCustomFunctions;
      },
      "Whether a custom autograd.Function applied now is captured as one node (kiln.compile's "
      "capture is recording), rather than run (eagerly, or on the fakes of AOT's traces).");
  m.def("_capture_custom_function", &captureApplication, nb::arg("key"), nb::arg("inputs"), nb::arg("run"),
        nb::arg("name"),
        "Records the application `key` of a custom autograd.Function on the capture's fake `inputs` "
        "as one node, after running `run(tensors, speculate)` (the application, returning its output "
        "tensors) and its backward apart: (output fakes, [(real tensor its code reads, index of the "
        "node's tensor argument standing for it)]). NotImplementedError when it cannot be traced.");
  m.def(
      "_recording", [] { return OpRecorder::current() != nullptr; },
      "Whether this thread's ops are being recorded into a graph (capture, retrace, joint trace).");
  m.def(
      "_stand_in",
      [](nb::handle real, nb::handle fake) {
        OpRecorder* r = OpRecorder::active();
        if (!r) throw Error("_stand_in: no recorder is active");
        r->standIn(unwrapTensor(real.ptr()), unwrapTensor(fake.ptr()));
      },
      "While tracing: the real tensor `real` is traced as the bound fake `fake` from now on.");
  compiler::registerExternalTarget(kApplyTarget, [](const std::vector<Value>& args) {
    static nb::handle apply =
        nb::object(nb::module_::import_("kiln.autograd.function").attr("apply_captured")).release();
    nb::list pyArgs;
    for (const Value& v : args)
      pyArgs.append(v.isTensor() ? wrap(v.toTensor()) : nb::int_(v.toInt()));
    nb::object out = apply(*nb::tuple(pyArgs));
    std::vector<Tensor> results;
    for (nb::handle o : out)
      results.push_back(unwrapTensor(o.ptr()));
    return results;
  });
}

} // namespace kiln::python
