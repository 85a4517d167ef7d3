// Max or average pooling over square windows of each channel, one layer class for both:
// they differ only in the backend calls. Max pooling keeps no state: backward finds each
// window's maximum again from the saved input (see Backend::maxpool2d_backward). Average
// pooling counts padded cells as zeros (the divisor is always kernel * kernel, PyTorch's
// default).
#pragma once

#include "nn/layer.hpp"
#include "nn/pool_shape.hpp"

namespace hpctrain {

class Pool2d final : public Layer {
 public:
  enum class Kind { kMax, kAvg };
  Pool2d(std::string name, Kind kind, int kernel, int stride, int padding = 0)
      : Layer(std::move(name)), kind_(kind), kernel_(kernel), stride_(stride), padding_(padding) {}
  const char* type() const override { return kind_ == Kind::kMax ? "maxpool" : "avgpool"; }
  bool any_layout() const override { return true; }

  Dims output_dims(const Dims& input) override {
    shape_ = pool_shape(name(), type(), input, kernel_, stride_, padding_);
    return {shape_.c, shape_.out_h(), shape_.out_w()};
  }
  std::string attributes() const override { return pool_attributes(shape_); }
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

 private:
  Kind kind_;
  int kernel_, stride_, padding_;
  Pool2dShape shape_;
};

}  // namespace hpctrain
