// The hooks every strategy shares (the start-up broadcast, the model state kept equal for
// evaluation) and the registry of strategies.
#include "train/exchange.hpp"

#include "core/error.hpp"

namespace hpctrain {

// The strategies, one file each. Adding one: its file, and its line in this list.
extern const ExchangeStrategy kAllreduceStrategy;
extern const ExchangeStrategy kAverageStrategy;
extern const ExchangeStrategy kAsyncStrategy;

const std::vector<const ExchangeStrategy*>& exchange_strategies() {
  static const std::vector<const ExchangeStrategy*> list = {
      &kAllreduceStrategy,
      &kAverageStrategy,
      &kAsyncStrategy,
  };
  return list;
}

const ExchangeStrategy& exchange_strategy(std::string_view name) {
  for (const ExchangeStrategy* s : exchange_strategies()) {
    if (s->decl.name == name) return *s;
  }
  throw Error("no exchange strategy '" + std::string(name) + "'");
}

void Exchange::start() {
  // Every rank initialised identically from the seed (or rank 0 loaded model.init_from);
  // broadcasting rank 0's parameters makes that a guarantee.
  WatchdogScope w(ctx_.watchdog, "parameter broadcast", 0);
  ctx_.collectives.broadcast_from_rank0(ctx_.model.mutable_params(), ctx_.model.param_count());
  ctx_.collectives.broadcast_from_rank0(ctx_.model.state(), ctx_.model.state_count());
}

void Exchange::after_optimizer(int64_t global_step, bool epoch_end) {
  state_diverged_ = ctx_.collectives.world_size() > 1 && ctx_.model.state_count() > 0;
  parameters_stepped(global_step, epoch_end);
}

void Exchange::sync_for_evaluation(int64_t global_step) {
  if (!state_diverged_) return;
  WatchdogScope w(ctx_.watchdog, "model state averaging", global_step);
  ctx_.collectives.average(ctx_.model.state(), ctx_.model.state_count());
  state_diverged_ = false;
}

}  // namespace hpctrain
