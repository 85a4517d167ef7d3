// Inverted dropout: in training each element is zeroed with probability p and the rest
// scaled by 1 / (1 - p); evaluation passes the input through. The mask is drawn from the
// seed the model sets per step (Layer::set_rng_seed), so runs repeat exactly, and kept
// in the layer's buffer for backward.
#pragma once

#include "nn/layer.hpp"

namespace hpctrain {

class Dropout final : public Layer {
 public:
  // Throws UsageError unless 0 <= p < 1.
  Dropout(std::string name, float p);
  const char* type() const override { return "dropout"; }
  bool any_layout() const override { return true; }

  Dims output_dims(const Dims& input) override;
  std::string attributes() const override;
  void allocate(Backend& backend, int64_t max_batch) override;
  void set_rng_seed(uint64_t seed) override { seed_ = seed; }
  bool draws_random() const override { return true; }
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

 private:
  float p_;
  int64_t sample_elems_ = 0;
  uint64_t seed_ = 0;
  bool masked_ = false;          // the last forward applied the mask (training with p > 0)
  DeviceArray<std::byte> mask_;  // activation type
};

}  // namespace hpctrain
