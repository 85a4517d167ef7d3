// Convolution, max pooling, batch normalisation and recurrent stacks (cudnn_rnn.hpp) of a
// CudaBackend, on its stream. NCHW:
// cuDNN, with algorithms chosen once per convolution shape (ConvPlanner). Channels last:
// cuDNN convolutions on NHWC data with KRSC filters, filter gradients transposed back to
// KCRS, and kernels/ for pooling and batch normalisation, also fused
// with a residual addition and relu (cuDNN's legacy NHWC calls for these are slow).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <memory>

#include "backend/cuda/conv_planner.hpp"
#include "backend/cuda/cudnn_util.hpp"
#include "backend/cuda_backend.hpp"
#include "core/conv_shape.hpp"

namespace hpctrain::cuda {

class CudnnLayers {
 public:
  // `warm_up` runs once, before the first convolution algorithm timing.
  CudnnLayers(const CudaBackendOptions& options, cudaStream_t stream,
              std::function<void()> warm_up);
  ~CudnnLayers();
  CudnnLayers(const CudnnLayers&) = delete;
  CudnnLayers& operator=(const CudnnLayers&) = delete;

  // Backend's operations of the same names.
  size_t conv2d_workspace_bytes(const Conv2dShape& s);
  void conv2d_forward(const Conv2dShape& s, const void* x, const void* w, void* y, void* workspace);
  void conv2d_backward_data(const Conv2dShape& s, const void* dy, const void* w, void* dx,
                            void* workspace, bool accumulate);
  void conv2d_backward_filter(const Conv2dShape& s, const void* x, const void* dy, float* dw,
                              void* workspace);
  void maxpool2d_forward(const Pool2dShape& s, const void* x, void* y);
  void maxpool2d_backward(const Pool2dShape& s, const void* x, const void* y, const void* dy,
                          void* dx);
  void batchnorm_forward_training(const void* x, const float* gamma, const float* beta, void* y,
                                  int n, int c, int hw, float eps, float momentum,
                                  float* running_mean, float* running_var, float* save_mean,
                                  float* save_invstd);
  void batchnorm_forward_inference(const void* x, const float* gamma, const float* beta, void* y,
                                   int n, int c, int hw, float eps, const float* running_mean,
                                   const float* running_var);
  void batchnorm_backward(const void* x, const void* dy, const float* gamma, void* dx,
                          float* dgamma, float* dbeta, int n, int c, int hw, float eps,
                          const float* save_mean, const float* save_invstd);

  // Backend::plan_rnn as options.cudnn_rnn says (cudnn_rnn.hpp).
  std::unique_ptr<RnnPlan> plan_rnn(const RnnShape& s);

  // Channels last only: kernels::batchnorm_nhwc_forward / _backward on m rows of c
  // channels (the fused batch normalisation, addition and relu).
  void batchnorm_nhwc_forward(bool training, const void* x, const void* z, bool relu,
                              const float* gamma, const float* beta, void* y, int m, int c,
                              float eps, float momentum, float* running_mean, float* running_var,
                              float* save_mean, float* save_invstd);
  void batchnorm_nhwc_backward(const void* x, const void* y, const void* dy, void* g,
                               const float* gamma, void* dx, float* dgamma, float* dbeta, int m,
                               int c, const float* save_mean, const float* save_invstd);

 private:
  // Bytes before cuDNN's part of a convolution workspace: the filter gradient as cuDNN
  // writes it (16-bit, or KRSC), whose size does not depend on the batch (none for float32
  // NCHW, written straight into dw).
  size_t dw_scratch_bytes(const Conv2dShape& s) const;
  bool writes_dw_scratch() const {
    return options_.act_type != DType::kF32 || options_.channels_last;
  }
  // pool_, a_ = input [n, c, h, w], b_ = pooled output (NCHW).
  void set_pool(const Pool2dShape& s);
  // a_ = data [n, c, hw, 1], bn_ = per-channel parameters [1, c, 1, 1] (NCHW).
  void set_bn(int n, int c, int hw, float eps);
  // Throws unless the backend is channels-last and the scratch holds c channels' sums.
  void check_nhwc(int c, const char* op) const;
  void done(const char* op) const { check_done(options_.sync_each_call, stream_, op); }

  // Coefficients and partial sums of the channels-last batch normalisation
  // (kernels/batchnorm.cu), 32 MiB: up to 2,048 row chunks of 2,000 channels (fewer chunks
  // for more channels, down to one of 2 million).
  static constexpr size_t kBnScratchFloats = size_t{8} << 20;

  CudaBackendOptions options_;
  cudaStream_t stream_;
  cudnnHandle_t cudnn_ = nullptr;
  std::unique_ptr<ConvPlanner> planner_;
  TensorDesc a_, b_, bn_;
  PoolDesc pool_;
  float* bn_scratch_ = nullptr;     // channels last only
  bool rnn_fallback_said_ = false;  // plan_rnn has said why cuDNN does not run them
};

}  // namespace hpctrain::cuda
