// CudnnLayers: cuDNN calls with their descriptors, and the channels-last kernels.
#include "backend/cuda/cudnn_layers.hpp"

#include <string>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cudnn_rnn.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/kernels.hpp"

namespace hpctrain::cuda {
namespace {

// Offsets inside a convolution workspace keep cuDNN's alignment (cudaMalloc's 256 bytes).
constexpr size_t kWorkspaceAlign = 256;

size_t filter_elems(const Conv2dShape& s) { return size_t(s.c_out) * s.patch(); }

}  // namespace

CudnnLayers::CudnnLayers(const CudaBackendOptions& options, cudaStream_t stream,
                         std::function<void()> warm_up)
    : options_(options), stream_(stream) {
  HT_CUDA(cudnnCreate(&cudnn_));
  HT_CUDA(cudnnSetStream(cudnn_, stream_));
  if (options_.channels_last) HT_CUDA(cudaMalloc(&bn_scratch_, kBnScratchFloats * sizeof(float)));
  planner_ =
      std::make_unique<ConvPlanner>(cudnn_, stream_, options_.act_type, options_.channels_last,
                                    options_.tf32, options_.deterministic, std::move(warm_up));
}

CudnnLayers::~CudnnLayers() {
  planner_.reset();
  cudaFree(bn_scratch_);
  cudnnDestroy(cudnn_);
}

std::unique_ptr<RnnPlan> CudnnLayers::plan_rnn(const RnnShape& s) {
  using Choice = CudaBackendOptions::CudnnRnn;
  if (options_.cudnn_rnn == Choice::kOff) return nullptr;
  std::string why;
  std::unique_ptr<RnnPlan> plan = make_cudnn_rnn(cudnn_, stream_, options_, s, why);
  if (plan == nullptr && options_.cudnn_rnn == Choice::kRequired) {
    throw UsageError("rnn: cudnn: " + why);
  }
  if (plan == nullptr && !rnn_fallback_said_) {
    log_info("recurrent layers step through their sequences with hpctrain's kernels (rnn auto: " +
             why + ")");
    rnn_fallback_said_ = true;
  }
  return plan;
}

// With 16-bit activations or channels last the workspace starts with the filter gradient's
// scratch (see conv2d_backward_filter); cuDNN's own workspace follows it.
size_t CudnnLayers::conv2d_workspace_bytes(const Conv2dShape& s) {
  return dw_scratch_bytes(s) + planner_->workspace_bytes(s);
}

size_t CudnnLayers::dw_scratch_bytes(const Conv2dShape& s) const {
  if (!writes_dw_scratch()) return 0;
  const size_t bytes = filter_elems(s) * dtype_size(options_.act_type);
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

void CudnnLayers::conv2d_forward(const Conv2dShape& s, const void* x, const void* w, void* y,
                                 void* workspace) {
  const ConvPlan& p = planner_->plan(s);
  const float one = 1.0f, zero = 0.0f;
  HT_CUDA(cudnnConvolutionForward(cudnn_, &one, p.x.get(), x, p.w.get(), w, p.conv_fwd.get(), p.fwd,
                                  workspace, p.workspace, &zero, p.y.get(), y));
  done("conv2d_forward");
}

// Accumulating is cuDNN's blending: dx = 1 * result + 1 * dx, in float, rounded once.
void CudnnLayers::conv2d_backward_data(const Conv2dShape& s, const void* dy, const void* w,
                                       void* dx, void* workspace, bool accumulate) {
  const ConvPlan& p = planner_->plan(s);
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  HT_CUDA(cudnnConvolutionBackwardData(cudnn_, &one, p.w.get(), w, p.y.get(), dy,
                                       p.conv_bwd_data.get(), p.bwd_data, workspace, p.workspace,
                                       &beta, p.x.get(), dx));
  done("conv2d_backward_data");
}

// cuDNN writes the filter gradient in the filter's type and layout: float32 NCHW straight
// into dw; 16-bit or KRSC (channels last) into the scratch at the workspace's start, then
// widened and, channels last, transposed into dw's KCRS order.
void CudnnLayers::conv2d_backward_filter(const Conv2dShape& s, const void* x, const void* dy,
                                         float* dw, void* workspace) {
  const ConvPlan& p = planner_->plan(s);
  const float one = 1.0f, zero = 0.0f;
  auto* ws = static_cast<std::byte*>(workspace);
  void* grad = writes_dw_scratch() ? static_cast<void*>(ws) : dw;
  HT_CUDA(cudnnConvolutionBackwardFilter(
      cudnn_, &one, p.x.get(), x, p.y.get(), dy, p.conv_bwd_filter.get(), p.bwd_filter,
      ws + dw_scratch_bytes(s), p.workspace, &zero, p.w.get(), grad));
  if (options_.channels_last) {
    kernels::convert_to_float_transposed(options_.act_type, ws, dw, s.c_out, s.kh * s.kw, s.c_in,
                                         stream_);
  } else if (options_.act_type != DType::kF32) {
    kernels::convert_to_float(options_.act_type, ws, dw, filter_elems(s), stream_);
  }
  done("conv2d_backward_filter");
}

void CudnnLayers::set_pool(const Pool2dShape& s) {
  // Max pooling: padded cells never win. Overlapping windows (ResNet's 3x3/2 stem pool)
  // add their gradients in a fixed order only in deterministic runs: that mode's backward
  // took 2.08 ms against 0.84 ms on an H100 (64x112x112 input, batch 128).
  HT_CUDA(cudnnSetPooling2dDescriptor(
      pool_.get(), options_.deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX,
      CUDNN_NOT_PROPAGATE_NAN, s.kh, s.kw, s.pad_h, s.pad_w, s.stride_h, s.stride_w));
  const cudnnDataType_t type = cudnn_type(options_.act_type);
  set_tensor(a_, type, s.n, s.c, s.h, s.w, false);
  set_tensor(b_, type, s.n, s.c, s.out_h(), s.out_w(), false);
}

void CudnnLayers::maxpool2d_forward(const Pool2dShape& s, const void* x, void* y) {
  if (options_.channels_last) {
    kernels::maxpool2d_nhwc_forward(options_.act_type, s, x, y, stream_);
  } else {
    set_pool(s);
    const float one = 1.0f, zero = 0.0f;
    HT_CUDA(cudnnPoolingForward(cudnn_, pool_.get(), &one, a_.get(), x, &zero, b_.get(), y));
  }
  done("maxpool2d_forward");
}

void CudnnLayers::maxpool2d_backward(const Pool2dShape& s, const void* x, const void* y,
                                     const void* dy, void* dx) {
  if (options_.channels_last) {
    kernels::maxpool2d_nhwc_backward(options_.act_type, s, x, y, dy, dx, stream_);
  } else {
    set_pool(s);
    const float one = 1.0f, zero = 0.0f;
    HT_CUDA(cudnnPoolingBackward(cudnn_, pool_.get(), &one, b_.get(), y, b_.get(), dy, a_.get(), x,
                                 &zero, a_.get(), dx));
  }
  done("maxpool2d_backward");
}

// cuDNN takes 16-bit data with float32 scale, bias, mean and variance (bn_).
void CudnnLayers::set_bn(int n, int c, int hw, float eps) {
  HT_REQUIRE(eps >= CUDNN_BN_MIN_EPSILON, "batchnorm: eps below cuDNN's minimum");
  set_tensor(a_, cudnn_type(options_.act_type), n, c, hw, 1, false);
  set_tensor(bn_, CUDNN_DATA_FLOAT, 1, c, 1, 1, false);
}

void CudnnLayers::batchnorm_forward_training(const void* x, const float* gamma, const float* beta,
                                             void* y, int n, int c, int hw, float eps,
                                             float momentum, float* running_mean,
                                             float* running_var, float* save_mean,
                                             float* save_invstd) {
  if (options_.channels_last) {
    batchnorm_nhwc_forward(true, x, nullptr, false, gamma, beta, y, n * hw, c, eps, momentum,
                           running_mean, running_var, save_mean, save_invstd);
    return;
  }
  set_bn(n, c, hw, eps);
  const float one = 1.0f, zero = 0.0f;
  HT_CUDA(cudnnBatchNormalizationForwardTraining(
      cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, a_.get(), x, a_.get(), y, bn_.get(), gamma,
      beta, momentum, running_mean, running_var, eps, save_mean, save_invstd));
  done("batchnorm_forward_training");
}

void CudnnLayers::batchnorm_forward_inference(const void* x, const float* gamma, const float* beta,
                                              void* y, int n, int c, int hw, float eps,
                                              const float* running_mean, const float* running_var) {
  if (options_.channels_last) {
    // Evaluation only reads the running statistics.
    batchnorm_nhwc_forward(false, x, nullptr, false, gamma, beta, y, n * hw, c, eps, 0.0f,
                           const_cast<float*>(running_mean), const_cast<float*>(running_var),
                           nullptr, nullptr);
    return;
  }
  set_bn(n, c, hw, eps);
  const float one = 1.0f, zero = 0.0f;
  HT_CUDA(cudnnBatchNormalizationForwardInference(cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                  a_.get(), x, a_.get(), y, bn_.get(), gamma, beta,
                                                  running_mean, running_var, eps));
  done("batchnorm_forward_inference");
}

void CudnnLayers::batchnorm_backward(const void* x, const void* dy, const float* gamma, void* dx,
                                     float* dgamma, float* dbeta, int n, int c, int hw, float eps,
                                     const float* save_mean, const float* save_invstd) {
  if (options_.channels_last) {
    batchnorm_nhwc_backward(x, nullptr, dy, nullptr, gamma, dx, dgamma, dbeta, n * hw, c, save_mean,
                            save_invstd);
    return;
  }
  if (dx == nullptr) {
    kernels::batchnorm_param_grads(options_.act_type, x, dy, dgamma, dbeta, n, c, hw, save_mean,
                                   save_invstd, stream_);
  } else {
    set_bn(n, c, hw, eps);
    const float one = 1.0f, zero = 0.0f;
    HT_CUDA(cudnnBatchNormalizationBackward(
        cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, a_.get(), x, a_.get(), dy,
        a_.get(), dx, bn_.get(), gamma, dgamma, dbeta, eps, save_mean, save_invstd));
  }
  done("batchnorm_backward");
}

void CudnnLayers::check_nhwc(int c, const char* op) const {
  HT_REQUIRE(options_.channels_last, std::string(op) + ": the backend is not channels-last");
  HT_REQUIRE(kernels::batchnorm_nhwc_min_scratch(c) <= kBnScratchFloats,
             std::string(op) + ": too many channels for the channels-last kernels");
}

void CudnnLayers::batchnorm_nhwc_forward(bool training, const void* x, const void* z, bool relu,
                                         const float* gamma, const float* beta, void* y, int m,
                                         int c, float eps, float momentum, float* running_mean,
                                         float* running_var, float* save_mean, float* save_invstd) {
  check_nhwc(c, "batchnorm_nhwc_forward");
  kernels::batchnorm_nhwc_forward(options_.act_type, training, x, z, relu, gamma, beta, y, m, c,
                                  eps, momentum, running_mean, running_var, save_mean, save_invstd,
                                  bn_scratch_, kBnScratchFloats, stream_);
  done("batchnorm_nhwc_forward");
}

void CudnnLayers::batchnorm_nhwc_backward(const void* x, const void* y, const void* dy, void* g,
                                          const float* gamma, void* dx, float* dgamma, float* dbeta,
                                          int m, int c, const float* save_mean,
                                          const float* save_invstd) {
  check_nhwc(c, "batchnorm_nhwc_backward");
  kernels::batchnorm_nhwc_backward(options_.act_type, x, y, dy, g, gamma, dx, dgamma, dbeta, m, c,
                                   save_mean, save_invstd, bn_scratch_, kBnScratchFloats, stream_);
  done("batchnorm_nhwc_backward");
}

}  // namespace hpctrain::cuda
