// Adam and AdamW over the parameter arena, one fused call per trainable range. Owns the
// first and second moments and the step counter, all in backend memory: with float16 loss
// scaling a skipped step leaves the counter as it was, decided where the parameters live.
#pragma once

#include <vector>

#include "optim/optimizer.hpp"

namespace hpctrain {

class Adam final : public Optimizer {
 public:
  // config.name "adamw" decouples the weight decay from the gradient.
  Adam(Backend& backend, const OptimizerConfig& config, size_t param_count,
       std::vector<ParamRange> trainable);
  void step(float* params, const float* grads, double lr, const float* skip) override;
  std::vector<OptimizerSlot> state() override;

 private:
  Backend& backend_;
  AdamParams params_;
  DeviceArray<float> m_, v_, step_;
  std::vector<ParamRange> trainable_;
};

}  // namespace hpctrain
