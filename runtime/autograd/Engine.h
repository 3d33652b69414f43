// The backward engine: runs the graph from some roots, each node once all the gradients it
// waits for have arrived (dependency counts), newest node first among the ready ones.
#pragma once
#include <vector>

#include "runtime/autograd/Node.h"

namespace kiln::autograd {

struct BackwardOptions {
  bool keepGraph = false;   // retain_graph
  bool createGraph = false; // record the backward itself (double backward)
  // autograd.grad: return the gradients at `inputs` instead of accumulating into .grad;
  // backward(inputs=...): accumulate only into those.
  bool accumulateGrad = true;
  bool allowUnused = false;
};

// Anomaly detection (torch.autograd.set_detect_anomaly), process-wide as torch's: with checkNan,
// the engine checks every gradient a node returns and raises naming the node ("Function
// 'DivBackward0' returned nan values in its 0th output.").
struct AnomalyMode {
  static bool enabled();
  static bool checkNan();
  static void set(bool enabled, bool checkNan);
};

// Runs backward from `roots` (one gradient each) and returns, for each of `inputs` (may be
// empty), the gradient that reached it (undefined when none did).
std::vector<Tensor> runBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& rootGrads,
                                const std::vector<Tensor>& inputs, const BackwardOptions& options);

} // namespace kiln::autograd
