// The CUDA backend's public face: whether this build has it, how many devices the
// process sees, and a factory. No CUDA header is needed to include it, so the trainer
// and the tests compile the same way in CPU-only builds (where the factory refuses).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"

namespace hpctrain {

struct CudaBackendOptions {
  int device = 0;              // CUDA device ordinal
  bool deterministic = false;  // only cuDNN algorithms that give repeatable results
  // Activations and the weights' compute copy (Backend::act_type): float32, or bfloat16 /
  // float16 for mixed precision (cuBLAS and cuDNN on tensor cores, float32 arithmetic).
  DType act_type = DType::kF32;
  bool tf32 = false;  // TF32 tensor cores in GEMMs and convolutions (float32 activations only)
  // Activations stored NHWC and filters' compute copy KRSC (Backend::channels_last): the
  // layout of cuDNN's fastest 16-bit convolutions, and of its tensor-core kernels for tf32.
  bool channels_last = false;
  // LSTM and GRU stacks on cuDNN's RNN API (Backend::plan_rnn): kAuto where cuDNN runs the
  // activation type (else the layer steps, said once on rank 0), kRequired (else
  // UsageError), kOff (the layer always steps through the sequence).
  enum class CudnnRnn { kAuto, kRequired, kOff } cudnn_rnn = CudnnRnn::kAuto;
  // Synchronise after every operation and check for errors, so that an asynchronous
  // failure names the operation that caused it (slow; for debugging). The environment
  // variable HPCTRAIN_CUDA_SYNC=1 turns it on too.
  bool sync_each_call = false;
};

// True when this build includes the CUDA backend.
bool cuda_built();

// Devices this process can use: 0 without a driver or a device, or without the backend.
int cuda_device_count();

// Where the backend's module lies and the versions of NVIDIA's libraries it loaded (the
// module is loaded by this call), or why it cannot be loaded or is not built.
std::string cuda_backend_description();

// Throws UsageError when the backend is not built or its module cannot be loaded, the device
// does not exist, or tf32 is asked for with 16-bit activations.
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);

}  // namespace hpctrain
