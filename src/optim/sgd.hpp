// SGD with momentum, Nesterov and weight decay over the parameter arena, one fused
// call per trainable range (the whole arena unless layers are frozen). Owns the
// velocity buffer (its checkpoint state).
#pragma once

#include <vector>

#include "optim/optimizer.hpp"

namespace hpctrain {

class Sgd final : public Optimizer {
 public:
  Sgd(Backend& backend, const OptimizerConfig& config, size_t param_count,
      std::vector<ParamRange> trainable);
  void step(float* params, const float* grads, double lr, const float* skip) override;
  // The momentum buffer; none when momentum is 0.
  std::vector<OptimizerSlot> state() override;

 private:
  Backend& backend_;
  SgdParams params_;
  DeviceArray<float> velocity_;
  std::vector<ParamRange> trainable_;
};

}  // namespace hpctrain
