// Global average pooling: [c, h, w] -> [c], the mean of each channel (the head of
// ResNets). It is average pooling with an h x w window, so every backend's pooling serves.
#pragma once

#include "nn/layer.hpp"
#include "nn/pool_shape.hpp"

namespace hpctrain {

class GlobalAvgPool final : public Layer {
 public:
  explicit GlobalAvgPool(std::string name) : Layer(std::move(name)) {}
  const char* type() const override { return "global_avgpool"; }
  bool any_layout() const override { return true; }

  // Throws UsageError unless the input is [c, h, w].
  Dims output_dims(const Dims& input) override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

 private:
  Pool2dShape shape_;  // window = the whole input plane; n set per batch
};

}  // namespace hpctrain
