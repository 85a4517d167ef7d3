// How the ranks keep one model: the exchange strategy that distributed.strategy names,
// one implementation per file (exchange_allreduce.cpp, exchange_average.cpp), registered
// once in exchange.cpp and chosen once at start-up. The Trainer calls it at fixed points
// of every step and knows no strategy by name:
//
//   start()                          once, before training: every rank holds rank 0's model
//   per step:  forward, loss
//              before_backward()     a listener for gradients as backward finishes them
//              backward
//              after_backward()      the gradients the optimizer reads are final
//              optimizer step
//              after_optimizer()     the parameters of this step are final
//   sync_for_evaluation()            before every evaluation and every checkpoint
//
// Each hook may run collectives; every rank calls the hooks in the same order. A strategy
// that keeps state of its own between hooks (a pipeline stage's activations) owns it. A
// strategy whose ranks do not step together (StrategyDecl::lockstep false: async) gets only
// start(), gradient_scale() and sync_for_evaluation(); its steps are driven by
// Trainer::train_epoch_async (train/async_sgd.hpp). Used from the training thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/model_collectives.hpp"
#include "config/catalog.hpp"
#include "config/config.hpp"
#include "nn/model.hpp"
#include "optim/optimizer.hpp"
#include "train/watchdog.hpp"

namespace hpctrain {

// What a strategy works on; everything outlives it.
struct ExchangeContext {
  const Config& config;
  Model& model;
  const std::vector<ParamRange>& trainable;  // parameters the optimizer updates
  ModelCollectives& collectives;
  Watchdog& watchdog;  // every collective of a hook runs under a WatchdogScope
};

class Exchange {
 public:
  explicit Exchange(const ExchangeContext& context) : ctx_(context) {}
  virtual ~Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // summary.json's "algorithm": how the strategy's collectives run.
  virtual std::string algorithm() const = 0;
  // The factor of the loss gradient per sample, for a rank whose optimizer step takes
  // `rank_samples` samples of the `global_samples` of all ranks: 1 / global_samples when the
  // ranks' gradients are summed (so ranks with batches b1..bN train like one rank with their
  // sum), 1 / rank_samples when each rank steps on its own gradients.
  virtual float gradient_scale(int64_t rank_samples, int64_t global_samples) const = 0;

  // Collective: every rank starts from rank 0's parameters and model state.
  void start();
  // The listener Model::backward hands finished gradient ranges to, for a strategy that
  // exchanges them while backward goes on; null otherwise.
  virtual GradientListener* before_backward() { return nullptr; }
  // Whether before_backward() gives a listener (without starting anything).
  virtual bool overlaps_backward() const { return false; }
  // Collective: after backward, before the optimizer reads the gradients.
  virtual void after_backward(int64_t /*global_step*/) {}
  // Collective: after the optimizer step that made `global_step` steps; `epoch_end` when
  // it was the last step of an epoch. The parameters may be changed here (no checkpoint
  // snapshot is reading them).
  void after_optimizer(int64_t global_step, bool epoch_end);
  // Collective: every rank holds the same model to evaluate or checkpoint: the model state
  // (BatchNorm statistics, which each rank moves with its own batches) is averaged if a
  // step changed it since the last time.
  void sync_for_evaluation(int64_t global_step);

 protected:
  // The strategy's part of after_optimizer().
  virtual void parameters_stepped(int64_t /*global_step*/, bool /*epoch_end*/) {}

  const ExchangeContext ctx_;

 private:
  bool state_diverged_ = false;
};

// One strategy: its entry in the config catalog (name, help, whether replicas stay
// identical) and how to make it.
struct ExchangeStrategy {
  StrategyDecl decl;
  std::unique_ptr<Exchange> (*make)(const ExchangeContext& context);
};

// Every strategy, in the order the config reference lists them.
const std::vector<const ExchangeStrategy*>& exchange_strategies();
// The strategy `name` (a name the config loader accepted).
const ExchangeStrategy& exchange_strategy(std::string_view name);

}  // namespace hpctrain
