// LSTM and GRU stacks on cuDNN's RNN API (Backend::plan_rnn): cudnnRNNForward for every
// layer and step at once, cudnnRNNBackwardData_v8 and cudnnRNNBackwardWeights_v8 for the
// gradients. cuDNN keeps the weights in a weight space of its own layout; the plan maps
// each gate's matrix and bias there from the layer's PyTorch-ordered parameters once, copies
// the compute copy in before each forward and the weight gradients out (widened to float32)
// after each backward. Data are time-major in cuDNN's padded layout (which the unpacked
// layouts need), every sequence with all steps; arithmetic is float32, on tensor cores for
// 16-bit data and for tf32.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "backend/cuda_backend.hpp"

namespace hpctrain::cuda {

// A plan on `handle` and `stream`, or null with the reason in `why` where cuDNN cannot run
// `shape` in options.act_type: bfloat16 before cuDNN 9.13, or a refusal while setting up or
// in a training and an inference pass on scratch data, which the plan runs before it is
// handed out. A fault that leaves the device unusable is thrown, not a reason to fall back.
std::unique_ptr<RnnPlan> make_cudnn_rnn(cudnnHandle_t handle, cudaStream_t stream,
                                        const CudaBackendOptions& options, const RnnShape& shape,
                                        std::string& why);

}  // namespace hpctrain::cuda
