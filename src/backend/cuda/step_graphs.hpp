// CUDA graphs of a CudaBackend (Backend::begin_capture and the rest): stream capture in
// thread-local mode, so the input threads' CUDA calls go on meanwhile; each recording
// instantiated once and launched on the stream given as often as asked.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

namespace hpctrain::cuda {

class StepGraphs {
 public:
  StepGraphs() = default;
  ~StepGraphs() { drop(); }
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  void begin(cudaStream_t stream);
  int end(cudaStream_t stream);  // the recording's id
  // After a failure: no capture left open on `stream`, no error left pending.
  void abort(cudaStream_t stream);
  void launch(int id, cudaStream_t stream);
  void drop();

 private:
  std::vector<cudaGraphExec_t> execs_;
};

}  // namespace hpctrain::cuda
