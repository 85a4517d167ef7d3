// 2-D convolution layer over NCHW inputs: filters [filters, c_in, k, k] (PyTorch's and
// cuDNN's layout), optional per-channel bias. He-normal initialisation (fan-in), as the
// layer is meant to feed a ReLU. The backend lowers it (im2col + GEMM on the CPU) in the
// model's shared workspace.
#pragma once

#include "core/conv_shape.hpp"
#include "nn/layer.hpp"

namespace hpctrain {

class Conv2d final : public Layer {
 public:
  struct Options {
    int filters = 0;  // output channels
    int kernel = 3;   // square kernel
    int stride = 1;
    int padding = 0;  // zeros on each side
    bool bias = true;
  };
  Conv2d(std::string name, const Options& options);
  const char* type() const override { return "conv2d"; }
  bool any_layout() const override { return true; }

  // Input [c_in, h, w]; throws UsageError if it is not 3-D or smaller than the kernel.
  Dims output_dims(const Dims& input) override;
  size_t param_count() const override;
  int64_t forward_macs() const override;
  std::string attributes() const override;
  size_t workspace_bytes(Backend& backend, int64_t max_batch) const override;
  void filters(size_t offset, std::vector<FilterSpec>& out) const override {
    out.push_back({offset, shape_.c_out, shape_.c_in, shape_.kh * shape_.kw});
  }
  void bind(const ParamSlice& p) override;
  void init_params(Rng& rng, float* host_params) override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                Tensor* dx) override {
    backward(backend, x, dy, dx, false);
  }
  // backward() that adds the input gradient to dx when accumulate_dx (a ResNet block's
  // branches meeting at its input).
  void backward(Backend& backend, const Tensor& x, const Tensor& dy, Tensor* dx,
                bool accumulate_dx);

 private:
  Conv2dShape shape(int64_t batch) const;
  size_t weight_count() const { return static_cast<size_t>(shape_.c_out) * shape_.patch(); }

  Options options_;
  Conv2dShape shape_;        // n unset; filled by output_dims()
  const void* w_ = nullptr;  // the weights' compute copy
  const float* b_ = nullptr;
  float* dw_ = nullptr;
  float* db_ = nullptr;
};

}  // namespace hpctrain
