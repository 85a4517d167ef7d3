// Strategy average (parameter averaging): every rank steps on its own gradients, and every
// distributed.every steps, and at the end of each epoch so that every rank evaluates the
// same model, the ranks' parameters are replaced by their average. Optimizer state stays
// per rank (checkpoints store it per rank).
#include <memory>

#include "train/exchange.hpp"

namespace hpctrain {
namespace {

class AverageExchange final : public Exchange {
 public:
  using Exchange::Exchange;

  std::string algorithm() const override {
    return ctx_.collectives.on_device() ? "nccl allreduce" : "reduce+bcast";
  }

  float gradient_scale(int64_t rank_samples, int64_t /*global_samples*/) const override {
    return 1.0f / static_cast<float>(rank_samples);
  }

 protected:
  void parameters_stepped(int64_t global_step, bool epoch_end) override {
    if (global_step % ctx_.config.distributed.every != 0 && !epoch_end) return;
    WatchdogScope w(ctx_.watchdog, "parameter averaging", global_step);
    // The trainable ranges only: frozen layers are equal on every rank already, and the
    // average of equal copies, (x + x + x) / 3, is not always x in float32.
    for (const ParamRange& r : ctx_.trainable) {
      ctx_.collectives.average(ctx_.model.mutable_params() + r.offset, r.count);
    }
  }
};

}  // namespace

extern const ExchangeStrategy kAverageStrategy = {
    {"average",
     "each rank steps on its own gradients; the ranks' parameters are averaged every "
     "distributed.every steps and at the end of each epoch",
     /*identical_replicas=*/false, /*one_stored_state=*/false, /*lockstep=*/true},
    [](const ExchangeContext& c) -> std::unique_ptr<Exchange> {
      return std::make_unique<AverageExchange>(c);
    }};

}  // namespace hpctrain
