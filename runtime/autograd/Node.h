// The backward graph: a Node computes the gradients of a forward op's inputs from the
// gradients of its outputs; Edges point at the Nodes (or leaf accumulators) that consume them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/DimVector.h"
#include "runtime/TensorImpl.h"

namespace kiln::autograd {

class Node;

// Where a gradient goes: input `inputNr` of node `fn` (an invalid edge drops the gradient).
struct Edge {
  IntrusivePtr<Node> fn;
  uint32_t inputNr = 0;
  bool valid() const { return bool(fn); }
};

// The shape and dtype a gradient must have on arrival: the engine sums broadcast dims away and
// casts (PyTorch's validate_outputs), so formulas need not.
struct InputMetadata {
  DimVector sizes;
  ScalarType dtype = ScalarType::Float32;
  Device device;
};

// A hook on a gradient: returns a replacement, or an undefined Tensor to keep it.
using GradHook = std::function<Tensor(const Tensor&)>;

class Node : public RefCounted {
public:
  Node();
  ~Node() override;

  // grads[i] is the gradient of forward output i (undefined when none flowed there); returns one
  // gradient per next edge (undefined where an input needs none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // PyTorch's name, e.g. "MulBackward0".
  virtual std::string name() const = 0;
  // Frees saved tensors once a backward without retain_graph has run this node.
  virtual void releaseVariables() {}

  const std::vector<Edge>& nextEdges() const { return nextEdges_; }
  void setNextEdges(std::vector<Edge> edges) { nextEdges_ = std::move(edges); }
  void addNextEdge(Edge e) { nextEdges_.push_back(std::move(e)); }
  bool needsInputGrad(size_t i) const { return i < nextEdges_.size() && nextEdges_[i].valid(); }

  // One entry per forward output, recorded when the output gets this node as grad_fn.
  uint32_t addInputMetadata(const Tensor& t);
  const std::vector<InputMetadata>& inputMetadata() const { return inputMeta_; }
  size_t numInputs() const { return inputMeta_.size(); }

  // Creation order; among ready nodes the engine runs the newest first, as PyTorch does.
  uint64_t sequenceNr() const { return sequenceNr_; }

  // Hooks on the gradient arriving at input i (Tensor.register_hook of a non-leaf, retain_grad).
  void addTensorPreHook(uint32_t input, GradHook hook) { preHooks_.push_back({input, std::move(hook)}); }
  void addRetainGradHook(uint32_t input, GradHook hook) { retainHooks_.push_back({input, std::move(hook)}); }
  void runPreHooks(std::vector<Tensor>& grads) const;
  void runRetainGradHooks(const std::vector<Tensor>& grads) const;
  void clearRetainGradHooks(uint32_t input);

  // Hooks on the node itself (grad_fn.register_hook / register_prehook); any callable.
  using NodeHook = std::function<void(std::vector<Tensor>& gradInputs, const std::vector<Tensor>& gradOutputs)>;
  using NodePreHook = std::function<void(std::vector<Tensor>& gradOutputs)>;
  void addPostHook(NodeHook h) { postHooks_.push_back(std::move(h)); }
  void addNodePreHook(NodePreHook h) { nodePreHooks_.push_back(std::move(h)); }
  void runNodePreHooks(std::vector<Tensor>& grads) const;
  void runPostHooks(std::vector<Tensor>& gradInputs, const std::vector<Tensor>& gradOutputs) const;

private:
  std::vector<Edge> nextEdges_;
  std::vector<InputMetadata> inputMeta_;
  uint64_t sequenceNr_;
  std::vector<std::pair<uint32_t, GradHook>> preHooks_, retainHooks_;
  std::vector<NodeHook> postHooks_;
  std::vector<NodePreHook> nodePreHooks_;
};

// A node whose backward cannot run: the op has no derivative formula (raised when reached).
class NotImplementedNode final : public Node {
public:
  explicit NotImplementedNode(std::string op) : op_(std::move(op)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "NotImplemented"; }

private:
  std::string op_;
};

// A node that sends its gradient on unchanged to one edge per input, or drops it (used for
// ops whose derivative is the identity: alias, Function outputs marked dirty, ...).
class IdentityNode final : public Node {
public:
  explicit IdentityNode(std::string name) : name_(std::move(name)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return std::move(grads); }
  std::string name() const override { return name_; }

private:
  std::string name_;
};

// The last node reached for a leaf: accumulates into its .grad (AccumulateGrad).
class AccumulateGrad final : public Node {
public:
  explicit AccumulateGrad(IntrusivePtr<TensorImpl> leaf);
  ~AccumulateGrad() override;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const IntrusivePtr<TensorImpl>& variable() const { return leaf_; }

private:
  IntrusivePtr<TensorImpl> leaf_;
};

} // namespace kiln::autograd
