// make_optimizer: optimizer.name to its implementation.
#include "optim/optimizer.hpp"

#include "core/error.hpp"
#include "optim/adam.hpp"
#include "optim/sgd.hpp"

namespace hpctrain {

std::unique_ptr<Optimizer> make_optimizer(Backend& backend, const OptimizerConfig& config,
                                          size_t param_count, std::vector<ParamRange> trainable) {
  if (config.name == "sgd") {
    return std::make_unique<Sgd>(backend, config, param_count, std::move(trainable));
  }
  if (config.name == "adam" || config.name == "adamw") {
    return std::make_unique<Adam>(backend, config, param_count, std::move(trainable));
  }
  throw Error("unknown optimizer '" + config.name + "'");  // the config loader checked it
}

}  // namespace hpctrain
