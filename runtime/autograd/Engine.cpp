// The backward engine (PyTorch's engine.cpp, single-threaded): dependency counts from the roots,
// a ready queue ordered by creation (newest first), per-node input buffers that sum arriving
// gradients, gradients validated against each input's shape and dtype.
#include "runtime/autograd/Engine.h"

#include <cstdint>
#include <queue>
#include <unordered_map>

#include "generated/Ops.h"
#include "runtime/DispatchKey.h"
#include "runtime/autograd/AutogradMeta.h"
#include "runtime/autograd/FormulaHelpers.h"

namespace kiln::autograd {

namespace {

class GraphRoot final : public Node {
public:
  explicit GraphRoot(std::vector<Tensor> grads) : grads_(std::move(grads)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return grads_; }
  std::string name() const override { return "GraphRoot"; }

private:
  std::vector<Tensor> grads_;
};

class GradModeGuard {
public:
  explicit GradModeGuard(bool on) : prev_(GradMode::isEnabled()) { GradMode::setEnabled(on); }
  ~GradModeGuard() { GradMode::setEnabled(prev_); }

private:
  bool prev_;
};

// A gradient made to fit the input it goes to: broadcast dims summed, dtype cast.
Tensor validateGrad(Tensor grad, const InputMetadata& meta, const Node& producer, size_t index) {
  if (DimVector(grad.sizes()) != meta.sizes) {
    KILN_CHECK(isExpandableTo(meta.sizes, grad.sizes()), "Function ", producer.name(),
               " returned an invalid gradient at index ", index, " - got ", grad.shapeString(),
               " but expected shape compatible with ", shapeString(meta.sizes));
    grad = sumTo(grad, meta.sizes);
  }
  if (grad.dtype() != meta.dtype) grad = ops::_to_copy(grad, meta.dtype);
  return grad;
}

void addInto(Tensor& slot, Tensor grad) {
  if (!grad.defined()) return;
  if (!slot.defined()) slot = std::move(grad);
  else slot = ops::add(slot, grad);
}

bool gAnomalyEnabled = false;
bool gAnomalyCheckNan = true;

// Anomaly mode's check of a node's returned gradients.
void checkForNan(const Node& node, const std::vector<Tensor>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& g = outputs[i];
    if (!g.defined() || !isDifferentiableType(g.dtype()) || g.numel() == 0) continue;
    KILN_CHECK(!ops::any(ops::isnan(g)).item().toBool(), "Function '", node.name(),
               "' returned nan values in its ", i, "th output.");
  }
}

struct ReadyOrder {
  bool operator()(Node* a, Node* b) const { return a->sequenceNr() < b->sequenceNr(); }
};

} // namespace

bool AnomalyMode::enabled() { return gAnomalyEnabled; }
bool AnomalyMode::checkNan() { return gAnomalyCheckNan; }
void AnomalyMode::set(bool enabled, bool checkNan) {
  gAnomalyEnabled = enabled;
  gAnomalyCheckNan = checkNan;
}

std::vector<Tensor> runBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& rootGrads,
                                const std::vector<Tensor>& inputs, const BackwardOptions& options) {
  GradModeGuard gradMode(options.createGraph);
  std::vector<Edge> rootEdges;
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = gradientEdge(roots[i]);
    KILN_CHECK(e.valid(), "element ", i, " of tensors does not require grad and does not have a grad_fn");
    rootEdges.push_back(std::move(e));
  }
  auto root = makeIntrusive<GraphRoot>(rootGrads);
  root->setNextEdges(rootEdges);

  // Gradients to capture: (node, input) -> index into `inputs`.
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  std::vector<Edge> inputEdges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradientEdge(inputs[i]);
    KILN_CHECK(e.valid(), "One of the differentiated Tensors does not require grad");
    captures[e.fn.get()].push_back({e.inputNr, i});
    inputEdges.push_back(std::move(e));
  }

  // Dependency counts, and (when inputs are given) which nodes lead to one of them.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, bool> needed;
  std::vector<Node*> order; // post-order
  {
    std::vector<std::pair<Node*, size_t>> stack{{root.get(), 0}};
    std::unordered_map<Node*, bool> seen{{root.get(), true}};
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->nextEdges().size()) {
        const Edge& e = node->nextEdges()[next++];
        if (!e.valid()) continue;
        deps[e.fn.get()] += 1;
        if (!seen[e.fn.get()]) {
          seen[e.fn.get()] = true;
          stack.push_back({e.fn.get(), 0});
        }
      } else {
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  bool filtered = !inputs.empty();
  if (filtered) {
    for (Node* node : order) {
      bool need = false;
      if (!dynamic_cast<AccumulateGrad*>(node)) {
        for (const Edge& e : node->nextEdges())
          if (e.valid() && (needed[e.fn.get()] || captures.count(e.fn.get()))) need = true;
      }
      needed[node] = need;
    }
  }

  std::vector<Tensor> captured(inputs.size());
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  ready.push(root.get());
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> grads;
    if (node != root.get()) {
      auto it = buffers.find(node);
      if (it != buffers.end()) grads = std::move(it->second), buffers.erase(it);
      grads.resize(node->numInputs());
      node->runPreHooks(grads);
      node->runRetainGradHooks(grads);
      if (auto c = captures.find(node); c != captures.end())
        for (auto [inputNr, index] : c->second)
          if (inputNr < grads.size()) captured[index] = grads[inputNr];
      bool isAccumulator = dynamic_cast<AccumulateGrad*>(node) != nullptr;
      bool run = filtered ? (isAccumulator ? options.accumulateGrad && captures.count(node) : needed[node])
                          : (options.accumulateGrad || !isAccumulator);
      if (!run) continue;
    }
    node->runNodePreHooks(grads);
    std::vector<Tensor> outputs = node->apply(std::move(grads));
    if (gAnomalyEnabled && gAnomalyCheckNan) checkForNan(*node, outputs);
    if (!options.keepGraph) node->releaseVariables();
    const auto& edges = node->nextEdges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < outputs.size() && outputs[i].defined()) {
        Tensor g = validateGrad(std::move(outputs[i]), e.fn->inputMetadata().at(e.inputNr), *node, i);
        auto& buf = buffers[e.fn.get()];
        if (buf.size() <= e.inputNr) buf.resize(e.inputNr + 1);
        addInto(buf[e.inputNr], std::move(g));
      }
      if (--deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
  }
  if (!options.allowUnused && !options.accumulateGrad) {
    for (size_t i = 0; i < captured.size(); ++i)
      KILN_CHECK(captured[i].defined(),
                 "One of the differentiated Tensors appears to not have been used in the graph. Set "
                 "allow_unused=True if this is the desired behavior.");
  }
  return captured;
}

} // namespace kiln::autograd
