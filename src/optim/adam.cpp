// Adam step: the arithmetic lives in Backend::adam_update so it runs where the parameters
// live.
#include "optim/adam.hpp"

#include "checkpoint/checkpoint_state.hpp"

namespace hpctrain {

Adam::Adam(Backend& backend, const OptimizerConfig& config, size_t param_count,
           std::vector<ParamRange> trainable)
    : backend_(backend),
      m_(backend, param_count),
      v_(backend, param_count),
      step_(backend, 1),
      trainable_(std::move(trainable)) {
  params_.beta1 = config.beta1;
  params_.beta2 = config.beta2;
  params_.eps = static_cast<float>(config.eps);
  params_.weight_decay = static_cast<float>(config.weight_decay);
  params_.decoupled = config.name == "adamw";
}

void Adam::step(float* params, const float* grads, double lr, const float* skip) {
  params_.lr = static_cast<float>(lr);
  backend_.count_step(step_.data(), skip);
  for (const ParamRange& r : trainable_) {
    backend_.adam_update(params + r.offset, grads + r.offset, m_.data() + r.offset,
                         v_.data() + r.offset, r.count, params_, step_.data(), skip);
  }
}

std::vector<OptimizerSlot> Adam::state() {
  return {{kAdamFirstMomentArray, m_.data(), m_.size(), true},
          {kAdamSecondMomentArray, v_.data(), v_.size(), true},
          {kAdamStepArray, step_.data(), 1, false}};
}

}  // namespace hpctrain
