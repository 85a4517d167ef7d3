// SGD step: the arithmetic lives in Backend::sgd_update so it runs where the
// parameters live.
#include "optim/sgd.hpp"

#include "checkpoint/checkpoint_state.hpp"

namespace hpctrain {

Sgd::Sgd(Backend& backend, const OptimizerConfig& config, size_t param_count,
         std::vector<ParamRange> trainable)
    : backend_(backend),
      velocity_(backend, config.momentum > 0.0 ? param_count : 0),
      trainable_(std::move(trainable)) {
  params_.momentum = static_cast<float>(config.momentum);
  params_.weight_decay = static_cast<float>(config.weight_decay);
  params_.nesterov = config.nesterov;
}

void Sgd::step(float* params, const float* grads, double lr, const float* skip) {
  params_.lr = static_cast<float>(lr);
  for (const ParamRange& r : trainable_) {
    float* v = velocity_.size() > 0 ? velocity_.data() + r.offset : nullptr;
    backend_.sgd_update(params + r.offset, grads + r.offset, v, r.count, params_, skip);
  }
}

std::vector<OptimizerSlot> Sgd::state() {
  if (velocity_.size() == 0) return {};
  return {{kVelocityArray, velocity_.data(), velocity_.size(), true}};
}

}  // namespace hpctrain
