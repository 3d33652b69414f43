// A CUDA graph: the work one function queues on a stream, captured once (cuStreamBeginCapture ..
// cuStreamEndCapture, cuGraphInstantiate) and launched again as one unit (cuGraphLaunch), which
// costs one driver call instead of one per kernel. What `mode="reduce-overhead"` replays.
#pragma once
#include <functional>
#include <memory>

#include "runtime/cuda/CudaStream.h"

namespace kiln::cuda {

class CudaGraph {
public:
  // Captures what `record` queues on `stream` (not the legacy default stream) and instantiates
  // it. While recording, this thread may not allocate device memory, free it or synchronize (the
  // capture fails with the driver's error naming the call). Nothing runs until launch().
  static std::unique_ptr<CudaGraph> capture(CudaStream stream, const std::function<void()>& record);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Queues the captured work on `stream` (any stream of the capture's device).
  void launch(CudaStream stream) const;
  int device() const { return device_; }

private:
  CudaGraph(CUgraphExec exec, int device) : exec_(exec), device_(device) {}
  CUgraphExec exec_;
  int device_;
};

} // namespace kiln::cuda
