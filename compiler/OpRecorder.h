// OpRecorder: records every op dispatched on this thread into a Graph while it is active (the
// Tracing dispatch key's fallback), running the ops on fake (meta) tensors so that each node
// gets its type. This is how capture (frontend/capture) and AOT tracing (make_fx) build graphs
// from real calls of kiln's ops: the caller binds fake tensors to the graph's inputs, calls
// ops on them, and reads back the node that produced each fake result.
//
// A recorder can also decompose (`decompose`): an op that is above the requested level and has
// a decomposition (compiler/Decompositions.h) is not recorded; its decomposition runs instead,
// with tracing still on, so the ops it calls are recorded (or decomposed in turn).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/Graph.h"
#include "runtime/Dispatcher.h"
#include "runtime/TensorImpl.h"

namespace kiln::compiler {

// A meta tensor with the sizes, strides, offset, dtype and requires_grad of `real`.
Tensor makeFake(const Tensor& real);

// The op set a recorder records: every op (None), Core ATen (ops tagged core, and copy_ for
// writes into inputs), or Prims (ops tagged prims). Ops outside the set that have no decomposition are recorded as
// they are.
enum class DecomposeTo { None, CoreAten, Prims };

// Whether an op is outside the op set of `level` (so that it decomposes when it can).
bool needsDecomposition(OpId op, DecomposeTo level);

class OpRecorder {
public:
  explicit OpRecorder(Graph& graph);
  ~OpRecorder();
  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;

  Graph& graph() { return graph_; }

  // `fake` stands for the value of `node` (a placeholder, a get_attr, an op's result).
  void bind(const Tensor& fake, Node* node, Device device = Device());
  // Binds `t`, a fake that no op made but that views a bound fake's storage with the same
  // geometry (an output a custom autograd.Function returns as its input, with new history), to
  // that fake's node, so that ops read `t` itself and autograd sees its history. Returns the
  // node, or null when `t` is bound already or aliases nothing bound.
  Node* bindAlias(const Tensor& t);
  // The node a fake tensor stands for; null when it is not known.
  Node* nodeOf(const Tensor& fake) const;
  // The device the value a fake stands for lives on (CPU when it is not known).
  Device deviceOf(const Tensor& fake) const;

  // Called for a tensor argument that is neither bound nor a wrapped number (a real tensor
  // met inside an op call, e.g. a module's parameter): returns the node standing for it (the
  // caller usually makes a get_attr); the recorder binds a fake of it and uses that. Unset:
  // such a call raises.
  std::function<Node*(const Tensor& real)> liftTensor;

  // Where the next recorded nodes come from (copied into NodeMeta::loc).
  std::optional<SourceLoc> location;

  // The op set recorded nodes must belong to (see DecomposeTo).
  DecomposeTo decompose = DecomposeTo::None;
  // Called before each op is recorded (capture: a grad mode the autograd engine set while
  // running a backward inside the traced code becomes a _set_grad_enabled node).
  std::function<void()> beforeRecord;

  // Called when kiln's library code, running on fakes, reads a fake's values into Python
  // (tolist(), item()): the real tensor whose values the graph is then specialized to (the
  // caller guards them), or an undefined tensor: the read fails as on any meta tensor.
  std::function<Tensor(const Tensor& fake)> valuesOf;
  // `t`, or for a fake whose values the current recorder knows (valuesOf), the real tensor.
  static Tensor readable(const Tensor& t);

  // Decompose every op that has no Autograd kernel (derivative formula) of its own but has a
  // decomposition (composites), whatever the level: AOT autograd's joint trace (GraphTracer.h).
  bool decomposeOpsWithoutFormula = false;

  // While a Scope is alive, ops dispatched on this thread are recorded into this recorder
  // (ops that recorded ops call internally are not). Scopes nest; the innermost records.
  class Scope {
  public:
    explicit Scope(OpRecorder& r);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

  private:
    OpRecorder* saved_;
  };

  // The recorder of this thread's innermost Scope, or null.
  static const OpRecorder* current();
  // The same, for callers that bind values (a custom autograd.Function's capture and its stand-ins).
  static OpRecorder* active();

  // Whether a custom autograd.Function applied while this recorder is active may record its
  // Python backward on its outputs' history: AOT tracing (GraphTracer.h), whose engine run then
  // records the backward's ops, and the capture's speculation of one (frontend/capture). Off for
  // the capture itself, which records the application as one node instead.
  bool tracesCustomFunctions = false;

  // From now on the real tensor `real` (a module's parameter that a custom Function's Python code
  // reads by itself) is traced as `fake` (bound: the node's input standing for it), so that
  // autograd connects what that code computes from it to that input.
  void standIn(const Tensor& real, const Tensor& fake);

  // Whether `real` is a real tensor the graph reads (lifted by liftTensor: a parameter or
  // buffer kiln's library code used while running on fakes). Its value is an input of the
  // graph: reading it into Python (item(), float()) would bake this call's value in.
  bool isLifted(const Tensor& real) const { return lifted_.count(real.impl()) != 0; }

  // Records a call_function node of a target outside the op table (a custom autograd.Function's
  // application) at `location`, counted as a recorded op; the caller types and binds its results.
  Node* recordCall(const std::string& target, std::vector<Argument> args);

  // Nodes recorded only so that autograd run while capturing (a kiln.func transform, a traced
  // autograd.grad(create_graph=True)) can read what a custom Function's forward computed, its
  // application being one node of its own: the capture erases those that nothing reads when it
  // ends (eraseUnreadProvisional; their grad-mode switches too when all of them go).
  void markProvisional(Node* n) { provisional_.push_back(n); }
  void eraseUnreadProvisional();

  // Number of op nodes recorded so far.
  int numRecorded() const { return numRecorded_; }

private:
  struct Bound {
    Tensor fake; // kept alive so its address stays unique
    Node* node;
    Device device; // the device the value really lives on (fakes are meta)
  };
  // The device the value a fake of the current recorder stands for lives on (autocast's
  // resolver: runtime/Autocast.h); false for a fake it does not know.
  static bool fakeDevice(const Tensor& fake, DeviceType& device);
  // The Tracing key's fallback: records the call, then runs it on fakes below the key.
  static void fallback(OpId op, DispatchKeySet remaining, Stack& stack);
  void record(OpId op, Stack& stack);
  // Runs op's decomposition on fakes of the stack's tensors, tracing what it calls.
  void runDecomposition(OpId op, Stack& stack);
  Argument toArgument(Value& v, Device& device);
  Node* nodeFor(Tensor& t, Device& device);
  void bindResult(const Tensor& fake, Node* node, Device device);

  Graph& graph_;
  std::unordered_map<const TensorImpl*, Bound> nodes_;
  std::unordered_set<const TensorImpl*> lifted_;
  std::unordered_map<const TensorImpl*, std::pair<Tensor, Tensor>> standIns_; // real -> (real, fake)
  std::vector<Node*> provisional_;
  std::optional<OpId> currentOp_; // the op whose arguments are being converted (for errors)
  // The bound fake viewing the same storage with the same geometry as `t` (nodeFor's fallback).
  std::unordered_map<const TensorImpl*, Bound>::const_iterator aliasOf(const Tensor& t) const;
  int numRecorded_ = 0;
  // While a decomposition runs: the device of its op's result. Factories it calls with the
  // fakes' meta device (`self.device()`) make tensors on this device instead.
  std::optional<Device> decompositionDevice_;
  int decompositionDepth_ = 0;
  // The devices of the values bound so far (0-dim ones aside), and of the last one bound: where
  // a factory given a fake's meta device (`x.device` in library code) makes its tensor.
  std::vector<Device> devicesSeen_;
  Device lastDevice_;
  void noteDevice(const Tensor& fake, Device device);
  Device factoryDeviceOfMeta() const;
};

} // namespace kiln::compiler
