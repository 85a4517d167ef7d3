// Max pooling over square windows of each channel. Keeps no state: backward finds each
// window's maximum again from the saved input (see Backend::maxpool2d_backward).
#pragma once

#include "nn/layer.hpp"
#include "nn/pool_shape.hpp"

namespace hpctrain {

class MaxPool2d final : public Layer {
 public:
  MaxPool2d(std::string name, int kernel, int stride, int padding = 0)
      : Layer(std::move(name)), kernel_(kernel), stride_(stride), padding_(padding) {}
  const char* type() const override { return "maxpool"; }

  Dims output_dims(const Dims& input) override {
    shape_ = pool_shape(name(), type(), input, kernel_, stride_, padding_);
    return {shape_.c, shape_.out_h(), shape_.out_w()};
  }
  std::string attributes() const override { return pool_attributes(shape_); }
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

 private:
  int kernel_, stride_, padding_;
  Pool2dShape shape_;
};

}  // namespace hpctrain
