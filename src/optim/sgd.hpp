// SGD with momentum, Nesterov and weight decay over the parameter arena, one fused
// call per trainable range (the whole arena unless layers are frozen). Owns the
// velocity buffer (optimizer state for checkpoints).
#pragma once

#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace hpctrain {

// A slice [offset, offset + count) of the parameter arena.
struct ParamRange {
  size_t offset = 0;
  size_t count = 0;
};

class Sgd {
 public:
  // Only parameters inside `trainable` are updated (frozen ones get no weight
  // decay or momentum either).
  Sgd(Backend& backend, const OptimizerConfig& config, size_t param_count,
      std::vector<ParamRange> trainable);
  // `skip`: see Backend::sgd_update (null for none).
  void step(float* params, const float* grads, double lr, const float* skip);
  // Momentum buffer (empty when momentum is 0).
  float* velocity() { return velocity_.data(); }
  size_t velocity_size() const { return velocity_.size(); }

 private:
  Backend& backend_;
  SgdParams params_;
  DeviceArray<float> velocity_;
  std::vector<ParamRange> trainable_;
};

}  // namespace hpctrain
