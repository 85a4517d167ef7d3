// Gradient clipping by global norm (optimizer.clip_grad_norm), as
// torch.nn.utils.clip_grad_norm_: the L2 norm over every trainable range, then every
// gradient scaled by min(1, max_norm / (norm + 1e-6)). The norm stays in backend memory, so
// the step loop never waits for the device; the trainer clips after the exchange, when
// every rank holds the same summed gradient, so all ranks clip alike.
#pragma once

#include <vector>

#include "backend/backend.hpp"
#include "optim/optimizer.hpp"

namespace hpctrain {

class GradClipper {
 public:
  GradClipper(Backend& backend, float max_norm)
      : backend_(backend), max_norm_(max_norm), sum_(backend, 1) {}
  void clip(float* grads, const std::vector<ParamRange>& trainable);

 private:
  Backend& backend_;
  float max_norm_;
  DeviceArray<float> sum_;  // the squared norm
};

}  // namespace hpctrain
