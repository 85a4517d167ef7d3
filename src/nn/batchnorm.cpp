// BatchNorm: shapes, initial values and the backend's batch normalisation calls.
#include "nn/batchnorm.hpp"

#include <cstdio>
#include <limits>

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {

BatchNorm::BatchNorm(std::string name, float eps, float momentum)
    : Layer(std::move(name)), eps_(eps), momentum_(momentum) {
  if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f)) {
    throw UsageError("layer " + this->name() + ": batchnorm needs eps > 0 and 0 <= momentum <= 1");
  }
}

Dims BatchNorm::output_dims(const Dims& input) {
  if (input.size() != 1 && input.size() != 3) {
    throw UsageError("layer " + name() +
                     ": batchnorm expects [channels, height, width] or [features] inputs, got " +
                     std::to_string(input.size()) + "-D ones");
  }
  const int64_t hw = input.size() == 3 ? input[1] * input[2] : 1;
  if (input[0] > std::numeric_limits<int>::max() || hw > std::numeric_limits<int>::max()) {
    throw UsageError("layer " + name() + ": input too large");
  }
  c_ = static_cast<int>(input[0]);
  hw_ = static_cast<int>(hw);
  return input;
}

std::string BatchNorm::attributes() const {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "eps=%g momentum=%g", static_cast<double>(eps_),
                static_cast<double>(momentum_));
  return buf;
}

void BatchNorm::allocate(Backend& backend, int64_t /*max_batch*/) {
  save_mean_ = DeviceArray<float>(backend, static_cast<size_t>(c_));
  save_invstd_ = DeviceArray<float>(backend, static_cast<size_t>(c_));
}

void BatchNorm::bind(const ParamSlice& p) {
  params_ = p.params;
  grads_ = p.grads;
}

void BatchNorm::init_params(Rng& /*rng*/, float* host_params) {
  for (int i = 0; i < c_; ++i) {
    host_params[i] = 1.0f;
    host_params[c_ + i] = 0.0f;
  }
}

void BatchNorm::init_state(float* host_state) {
  for (int i = 0; i < c_; ++i) {
    host_state[i] = 0.0f;
    host_state[c_ + i] = 1.0f;
  }
}

void BatchNorm::forward(Backend& backend, const Tensor& x, Tensor& y, bool training) {
  if (relu_) {
    forward_add_relu(backend, x, nullptr, y, training);
    return;
  }
  const int n = static_cast<int>(x.batch);
  if (training) {
    backend.batchnorm_forward_training(x.data, params_, params_ + c_, y.data, n, c_, hw_, eps_,
                                       running_momentum(x.batch), state_, state_ + c_,
                                       save_mean_.data(), save_invstd_.data());
  } else {
    backend.batchnorm_forward_inference(x.data, params_, params_ + c_, y.data, n, c_, hw_, eps_,
                                        state_, state_ + c_);
  }
}

void BatchNorm::backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor* dx) {
  if (relu_) {
    backward_add_relu(backend, x, y, dy, dy.data, dx);
    return;
  }
  backend.batchnorm_backward(x.data, dy.data, params_, dx != nullptr ? dx->data : nullptr, grads_,
                             grads_ + c_, static_cast<int>(x.batch), c_, hw_, eps_,
                             save_mean_.data(), save_invstd_.data());
}

void BatchNorm::forward_add_relu(Backend& backend, const Tensor& x, const void* z, Tensor& y,
                                 bool training) {
  backend.batchnorm_add_relu_forward(
      training, x.data, z, params_, params_ + c_, y.data, static_cast<int>(x.batch), c_, hw_, eps_,
      running_momentum(x.batch), state_, state_ + c_, save_mean_.data(), save_invstd_.data());
}

void BatchNorm::backward_add_relu(Backend& backend, const Tensor& x, const Tensor& y,
                                  const Tensor& dy, void* dz, Tensor* dx) {
  backend.batchnorm_add_relu_backward(
      x.data, y.data, dy.data, dz, params_, dx != nullptr ? dx->data : nullptr, grads_, grads_ + c_,
      static_cast<int>(x.batch), c_, hw_, eps_, save_mean_.data(), save_invstd_.data());
}

extern const LayerType kBatchNormLayer = {
    {"batchnorm",
     "batch normalisation per channel (PyTorch's eps 1e-5 and momentum 0.1); its running "
     "statistics are averaged over the ranks before every evaluation and checkpoint. A "
     "training batch that gives a channel one value (features at a batch of 1, or 1x1 planes) "
     "leaves them as they are (its variance is 0 and nothing before the layer trains); a rank "
     "whose every batch is such is exit 2",
     {}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> {
      return std::make_unique<BatchNorm>(s.name);
    }};

}  // namespace hpctrain
