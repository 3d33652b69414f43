// Stream capture into an instantiated CUDA graph, and its launches.
#include "runtime/cuda/CudaGraph.h"

#include "runtime/Error.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"

namespace kiln::cuda {

std::unique_ptr<CudaGraph> CudaGraph::capture(CudaStream stream, const std::function<void()>& record) {
  const CudaDriver& driver = requireCudaDriver("CUDA graph capture");
  KILN_CHECK(stream.handle != nullptr, "CUDA graph capture: the default stream cannot be captured");
  CudaDeviceGuard guard(stream.device);
  KILN_CUDA_CHECK(cuStreamBeginCapture, stream.handle, kStreamCaptureModeThreadLocal);
  try {
    record();
  } catch (...) {
    // End the capture (its graph, if any, is dropped) so the stream is usable again.
    CUgraph partial = nullptr;
    driver.api().cuStreamEndCapture(stream.handle, &partial);
    if (partial) driver.api().cuGraphDestroy(partial);
    throw;
  }
  CUgraph graph = nullptr;
  KILN_CUDA_CHECK(cuStreamEndCapture, stream.handle, &graph);
  CUgraphExec exec = nullptr;
  CUresult r = driver.api().cuGraphInstantiate(&exec, graph, 0);
  driver.api().cuGraphDestroy(graph);
  driver.check(r, "cuGraphInstantiate");
  return std::unique_ptr<CudaGraph>(new CudaGraph(exec, stream.device));
}

CudaGraph::~CudaGraph() {
  CudaDeviceGuard guard(device_);
  CudaDriver::get().api().cuGraphExecDestroy(exec_);
}

void CudaGraph::launch(CudaStream stream) const {
  KILN_CHECK(stream.device == device_, "CUDA graph of cuda:", device_, " launched on a stream of cuda:",
             stream.device);
  CudaDeviceGuard guard(device_);
  KILN_CUDA_CHECK(cuGraphLaunch, exec_, stream.handle);
}

} // namespace kiln::cuda
