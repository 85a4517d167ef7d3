// Batch normalisation over the channels of [c, h, w] inputs or the features of [f] inputs:
// learned scale gamma (initially 1) and shift beta (0) per channel, running mean (0) and
// variance (1) as model state. Training normalises with the batch's statistics and updates
// the running ones; evaluation uses the running ones. The batch mean and 1/std survive from
// forward to backward in the layer's own buffers.
//
// With fuse_relu() (the model sets it when a ReLU layer follows) the layer's output is
// relu(bn(x)), computed in one backend call (Backend::batchnorm_add_relu_*); a ResNet block
// adds its shortcut in the same call through forward_add_relu().
#pragma once

#include "nn/layer.hpp"

namespace hpctrain {

class BatchNorm final : public Layer {
 public:
  static constexpr float kDefaultEps = 1e-5f;
  static constexpr float kDefaultMomentum = 0.1f;  // PyTorch's: weight of the new batch
  BatchNorm(std::string name, float eps = kDefaultEps, float momentum = kDefaultMomentum);
  const char* type() const override { return "batchnorm"; }
  bool any_layout() const override { return true; }

  // Throws UsageError unless the input is [c, h, w] or [f].
  Dims output_dims(const Dims& input) override;
  size_t param_count() const override { return 2 * static_cast<size_t>(c_); }
  int64_t forward_macs() const override { return c_ * hw_; }
  std::string attributes() const override;
  void allocate(Backend& backend, int64_t max_batch) override;
  void bind(const ParamSlice& p) override;
  void init_params(Rng& rng, float* host_params) override;
  size_t state_count() const override { return 2 * static_cast<size_t>(c_); }
  void bind_state(float* state) override { state_ = state; }
  void init_state(float* host_state) override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

  // Output relu(bn(x)) from now on; backward then overwrites dy with the gradient at the
  // relu's input.
  void fuse_relu() { relu_ = true; }
  // y = relu(bn(x) + z) (z: activations of y's shape, or null for none), and its backward
  // from y: the gradient at the addition goes to dz (which may be dy.data).
  void forward_add_relu(Backend& backend, const Tensor& x, const void* z, Tensor& y, bool training);
  void backward_add_relu(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                         void* dz, Tensor* dx);

  // Whether a training batch of `batch` samples gives each channel one value ([f], or 1x1
  // planes, at a batch of 1): its variance is 0, the output is beta and no gradient passes
  // (PyTorch refuses such a batch). Such a batch leaves the running statistics as they are.
  bool one_value_per_channel(int64_t batch) const { return batch * hw_ == 1; }

 private:
  float running_momentum(int64_t batch) const {
    return one_value_per_channel(batch) ? 0.0f : momentum_;
  }

  float eps_, momentum_;
  bool relu_ = false;
  int c_ = 0, hw_ = 0;
  float* params_ = nullptr;  // gamma[c], beta[c]
  float* grads_ = nullptr;
  float* state_ = nullptr;  // running mean[c], running variance[c]
  DeviceArray<float> save_mean_, save_invstd_;
};

}  // namespace hpctrain
