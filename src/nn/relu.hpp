// Rectified linear unit, element-wise; backward uses the output (y > 0 iff x > 0). After
// absorb() (the model calls it when the layer before computes the relu itself: a fused
// BatchNorm) the layer is a view of its input and computes nothing.
#pragma once

#include "nn/layer.hpp"

namespace hpctrain {

class Relu final : public Layer {
 public:
  explicit Relu(std::string name) : Layer(std::move(name)) {}
  const char* type() const override { return "relu"; }
  bool any_layout() const override { return true; }
  Dims output_dims(const Dims& input) override { return input; }
  bool is_view() const override { return absorbed_; }
  void absorb() { absorbed_ = true; }
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool /*training*/) override {
    if (!absorbed_) backend.relu_forward(x.data, y.data, static_cast<size_t>(x.elems()));
  }
  void backward(Backend& backend, const Tensor& /*x*/, const Tensor& y, const Tensor& dy,
                Tensor* dx) override {
    if (!absorbed_ && dx != nullptr) {
      backend.relu_backward(y.data, dy.data, dx->data, static_cast<size_t>(y.elems()));
    }
  }

 private:
  bool absorbed_ = false;
};

}  // namespace hpctrain
