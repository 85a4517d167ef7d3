// SGD step: the arithmetic lives in Backend::sgd_update so it runs where the
// parameters live.
#include "optim/sgd.hpp"

namespace hpctrain {

Sgd::Sgd(Backend& backend, const OptimizerConfig& config, size_t param_count)
    : backend_(backend),
      velocity_(backend, config.momentum > 0.0 ? param_count : 0),
      param_count_(param_count) {
  params_.momentum = static_cast<float>(config.momentum);
  params_.weight_decay = static_cast<float>(config.weight_decay);
  params_.nesterov = config.nesterov;
}

void Sgd::step(float* params, const float* grads, double lr) {
  params_.lr = static_cast<float>(lr);
  backend_.sgd_update(params, grads, velocity_.data(), param_count_, params_);
}

}  // namespace hpctrain
