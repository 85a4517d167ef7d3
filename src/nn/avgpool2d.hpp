// Average pooling over square windows of each channel; padded cells count as zeros (the
// divisor is always kernel * kernel, PyTorch's default).
#pragma once

#include "nn/layer.hpp"
#include "nn/pool_shape.hpp"

namespace hpctrain {

class AvgPool2d final : public Layer {
 public:
  AvgPool2d(std::string name, int kernel, int stride, int padding = 0)
      : Layer(std::move(name)), kernel_(kernel), stride_(stride), padding_(padding) {}
  const char* type() const override { return "avgpool"; }

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
