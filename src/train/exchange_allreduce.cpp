// Strategy allreduce: the ranks' gradients are summed every step, so every rank applies
// the same update and the replicas stay identical. With device collectives (NCCL) the
// gradients are summed in buckets while backward goes on (gradient_buckets.hpp); else the
// trainable ranges are summed after backward with the host algorithm (ring or MPI).
#include <memory>

#include "train/exchange.hpp"
#include "train/gradient_buckets.hpp"

namespace hpctrain {
namespace {

class AllreduceExchange final : public Exchange {
 public:
  explicit AllreduceExchange(const ExchangeContext& context) : Exchange(context) {
    ModelCollectives& c = ctx_.collectives;
    if (!c.on_device()) return;
    Backend* b = &c.backend();
    buckets_ = std::make_unique<GradientBuckets>(
        ctx_.trainable, static_cast<size_t>(ctx_.config.distributed.bucket_bytes) / sizeof(float),
        [b](float* g, size_t n) { b->allreduce_sum_async(g, n); }, [b] { b->wait_collectives(); });
  }

  std::string algorithm() const override {
    return ctx_.collectives.on_device() ? "nccl" : to_string(ctx_.collectives.host_algorithm());
  }

  float gradient_scale(int64_t /*rank_samples*/, int64_t global_samples) const override {
    return 1.0f / static_cast<float>(global_samples);
  }

  bool overlaps_backward() const override { return buckets_ != nullptr; }
  GradientListener* before_backward() override {
    if (!buckets_) return nullptr;
    buckets_->start(ctx_.model.grads());
    overlapping_ = true;
    return buckets_.get();
  }

  void after_backward(int64_t global_step) override {
    WatchdogScope w(ctx_.watchdog, "gradient all-reduce", global_step);
    if (buckets_) {
      // Without the listener (summed micro-batches) every bucket starts here.
      if (!overlapping_) buckets_->start(ctx_.model.grads());
      buckets_->finish();
      overlapping_ = false;
      return;
    }
    // Frozen layers' gradients are not needed by anyone: sum the trainable ranges only.
    for (const ParamRange& r : ctx_.trainable) {
      ctx_.collectives.allreduce_sum(ctx_.model.grads() + r.offset, r.count);
    }
  }

 private:
  std::unique_ptr<GradientBuckets> buckets_;  // with device collectives
  bool overlapping_ = false;                  // before_backward() started this step's buckets
};

}  // namespace

extern const ExchangeStrategy kAllreduceStrategy = {
    {"allreduce",
     "gradients summed over the ranks every step (distributed.algorithm), so every rank "
     "applies the same update",
     /*identical_replicas=*/true, /*one_stored_state=*/true, /*lockstep=*/true},
    [](const ExchangeContext& c) -> std::unique_ptr<Exchange> {
      return std::make_unique<AllreduceExchange>(c);
    }};

}  // namespace hpctrain
