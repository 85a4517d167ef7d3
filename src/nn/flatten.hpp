// Flatten: [c, h, w] -> [c * h * w]. NCHW samples are already contiguous, so it is a
// view: the model aliases its output to its input and forward/backward move no data.
// (Dense flattens its input anyway; the explicit layer makes YAML models read clearly.)
#pragma once

#include "core/error.hpp"
#include "nn/layer.hpp"

namespace hpctrain {

class Flatten final : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  const char* type() const override { return "flatten"; }
  bool is_view() const override { return true; }
  Dims output_dims(const Dims& input) override { return {dims_elems(input)}; }
  void forward(Backend& /*backend*/, const Tensor& x, Tensor& y, bool /*training*/) override {
    HT_REQUIRE(y.data == x.data, "flatten runs only as a view of its input");
  }
  void backward(Backend& /*backend*/, const Tensor& /*x*/, const Tensor& /*y*/, const Tensor& dy,
                Tensor* dx) override {
    HT_REQUIRE(dx == nullptr || dx->data == dy.data, "flatten runs only as a view of its input");
  }
};

}  // namespace hpctrain
