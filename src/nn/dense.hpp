// Fully connected layer: y = x W^T + b, W stored [out, in] row-major (PyTorch's
// layout, so weights compare directly). He-normal initialisation for layers that
// feed a ReLU, Glorot-uniform for the rest (the classifier). Per step, a sequence
// [T, in] becomes [T, out] with the same weights at every step (PyTorch's nn.Linear on
// a [batch, T, in] tensor); otherwise the input is flattened.
#pragma once

#include "nn/layer.hpp"

namespace hpctrain {

class Dense final : public Layer {
 public:
  enum class Init { kHe, kGlorot };
  Dense(std::string name, int64_t units, Init init = Init::kHe, bool per_step = false)
      : Layer(std::move(name)), out_(units), init_(init), per_step_(per_step) {}
  const char* type() const override { return "dense"; }

  Dims output_dims(const Dims& input) override;
  size_t param_count() const override { return static_cast<size_t>(out_ * in_ + out_); }
  int64_t forward_macs() const override { return steps_ * out_ * in_; }
  std::string attributes() const override { return per_step_ ? "per_step" : ""; }
  void bind(const ParamSlice& p) override;
  void init_params(Rng& rng, float* host_params) override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

 private:
  int64_t out_;
  Init init_;
  bool per_step_;
  int64_t in_ = 0;
  int64_t steps_ = 1;        // rows per sample: the sequence's steps when per step
  const void* w_ = nullptr;  // the weights' compute copy
  const float* b_ = nullptr;
  float* dw_ = nullptr;
  float* db_ = nullptr;
};

}  // namespace hpctrain
