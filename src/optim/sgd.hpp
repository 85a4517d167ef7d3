// SGD with momentum, Nesterov and weight decay over the whole parameter arena in
// one fused call. Owns the velocity buffer (optimizer state for checkpoints).
#pragma once

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace hpctrain {

class Sgd {
 public:
  Sgd(Backend& backend, const OptimizerConfig& config, size_t param_count);
  void step(float* params, const float* grads, double lr);
  // Momentum buffer (empty when momentum is 0).
  float* velocity() { return velocity_.data(); }
  size_t velocity_size() const { return velocity_.size(); }

 private:
  Backend& backend_;
  SgdParams params_;
  DeviceArray<float> velocity_;
  size_t param_count_;
};

}  // namespace hpctrain
