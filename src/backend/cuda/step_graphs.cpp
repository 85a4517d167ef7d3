// StepGraphs: capture, instantiation and launches (step_graphs.hpp).
#include "backend/cuda/step_graphs.hpp"

#include "backend/cuda/cuda_check.hpp"
#include "core/error.hpp"

namespace hpctrain::cuda {

void StepGraphs::begin(cudaStream_t stream) {
  HT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
}

int StepGraphs::end(cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  HT_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  HT_CUDA(e);
  execs_.push_back(exec);
  return static_cast<int>(execs_.size()) - 1;
}

void StepGraphs::abort(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();  // the failed capture's error is not a later call's
}

void StepGraphs::launch(int id, cudaStream_t stream) {
  HT_REQUIRE(id >= 0 && static_cast<size_t>(id) < execs_.size(), "no step graph of that id");
  HT_CUDA(cudaGraphLaunch(execs_[static_cast<size_t>(id)], stream));
}

void StepGraphs::drop() {
  for (cudaGraphExec_t e : execs_) cudaGraphExecDestroy(e);
  execs_.clear();
}

}  // namespace hpctrain::cuda
