// Rectified linear unit, element-wise; backward uses the output (y > 0 iff x > 0).
#pragma once

#include "nn/layer.hpp"

namespace hpctrain {

class Relu final : public Layer {
 public:
  explicit Relu(std::string name) : Layer(std::move(name)) {}
  const char* type() const override { return "relu"; }
  bool any_layout() const override { return true; }
  Dims output_dims(const Dims& input) override { return input; }
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool /*training*/) override {
    backend.relu_forward(x.data, y.data, static_cast<size_t>(x.elems()));
  }
  void backward(Backend& backend, const Tensor& /*x*/, const Tensor& y, const Tensor& dy,
                Tensor* dx) override {
    if (dx != nullptr) {
      backend.relu_backward(y.data, dy.data, dx->data, static_cast<size_t>(y.elems()));
    }
  }
};

}  // namespace hpctrain
