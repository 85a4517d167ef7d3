// Strategy async: Downpour-style parameter servers (train/async_sgd.hpp). Workers step
// through their batches without the per-step hooks: the Trainer drives AsyncSgd, which
// keeps every rank's model equal at each segment's end, so the hooks have nothing to do.
#include <memory>

#include "train/exchange.hpp"

namespace hpctrain {
namespace {

class AsyncExchange final : public Exchange {
 public:
  using Exchange::Exchange;

  std::string algorithm() const override { return "parameter servers"; }

  // A push is the sum of its batches' mean gradients.
  float gradient_scale(int64_t rank_samples, int64_t /*global_samples*/) const override {
    return 1.0f / static_cast<float>(rank_samples);
  }
};

}  // namespace

extern const ExchangeStrategy kAsyncStrategy = {
    {"async",
     "Downpour-style asynchronous SGD: the last distributed.parameter_servers ranks hold the "
     "parameters in slices; the other ranks (workers) take batches as they go, push their "
     "gradients every distributed.push_every steps and pull parameters every "
     "distributed.pull_every steps without waiting for each other",
     /*identical_replicas=*/false, /*one_stored_state=*/true, /*lockstep=*/false},
    [](const ExchangeContext& c) -> std::unique_ptr<Exchange> {
      return std::make_unique<AsyncExchange>(c);
    }};

}  // namespace hpctrain
