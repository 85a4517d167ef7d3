// The Trainer's exchanges between ranks: gradients, parameter and state averages, the
// start-up broadcast and the per-step control flags. Device collectives (NCCL) where the
// backend has them and each rank owns its device; else hpctrain's ring or MPI on host
// memory, through a staging copy when the backend's memory is not host memory.
#include <string>

#include "comm/device_group.hpp"
#include "comm/param_average.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "train/signals.hpp"
#include "train/trainer.hpp"

namespace hpctrain {

template <typename F>
void Trainer::collective_on_host(float* data, size_t n, bool write_back, F&& f) {
  if (world_size_ == 1) return;
  if (backend_->host_accessible()) {
    f(data);
    return;
  }
  backend_->copy_to_host(stage_.data(), data, n * sizeof(float));
  f(stage_.data());
  if (write_back) backend_->copy_to_device(data, stage_.data(), n * sizeof(float));
}

void Trainer::choose_allreduce() {
  const AllreduceAlgorithm requested = config_.distributed.algorithm;
  host_algorithm_ =
      requested == AllreduceAlgorithm::kMpi ? AllreduceAlgorithm::kMpi : AllreduceAlgorithm::kRing;
  if (!backend_->has_device_collectives()) return;
  if (requested != AllreduceAlgorithm::kAuto && requested != AllreduceAlgorithm::kNccl) return;
  // auto skips NCCL on one rank, where every collective is the identity; nccl asked for
  // by name runs it (a one-rank communicator).
  if (world_size_ == 1 && requested == AllreduceAlgorithm::kAuto) return;
  if (ranks_share_a_device(*comm_, backend_->device_id())) {
    if (requested == AllreduceAlgorithm::kNccl) {
      throw UsageError(config_.source_file +
                       ": distributed.algorithm: nccl needs one GPU per rank, and some ranks "
                       "share one (use ring or mpi, or fewer ranks per node)");
    }
    return;
  }
  join_device_collectives(*comm_, *backend_);
  device_collectives_ = true;
  Backend* b = backend_.get();
  buckets_ = std::make_unique<GradientBuckets>(
      trainable_, static_cast<size_t>(config_.distributed.bucket_bytes) / sizeof(float),
      [b](float* g, size_t n) { b->allreduce_sum_async(g, n); }, [b] { b->wait_collectives(); });
}

void Trainer::exchange_gradients() {
  if (config_.distributed.strategy != Strategy::kAllreduce) return;
  // Frozen layers' gradients are not needed by anyone: reduce trainable ranges only. (With
  // device collectives, buckets_ sums them during backward instead.)
  for (const ParamRange& r : trainable_) {
    collective_on_host(model_->grads() + r.offset, r.count, true,
                       [&](float* g) { comm_->allreduce_sum(g, r.count, host_algorithm_); });
  }
}

void Trainer::average_over_ranks(float* data, size_t n) {
  if (device_collectives_) {
    backend_->allreduce_sum(data, n);
    backend_->scale(data, n, 1.0f / static_cast<float>(world_size_));
    return;
  }
  collective_on_host(data, n, true, [&](float* p) { average_parameters(*comm_, p, n); });
}

void Trainer::broadcast_from_rank0(float* data, size_t n) {
  if (device_collectives_) {
    backend_->broadcast(data, n, 0);
    return;
  }
  collective_on_host(data, n, rank_ != 0,
                     [&](float* p) { comm_->broadcast(p, n * sizeof(float), 0); });
}

bool Trainer::agree_on_control(bool& checkpoint_now) {
  // [0]: some rank got a stop signal; [1]: rank 0's clock says a checkpoint is due.
  double flags[2] = {stop_signal() != 0 ? 1.0 : 0.0,
                     rank_ == 0 && checkpoints_->due_by_time(now_seconds()) ? 1.0 : 0.0};
  if (world_size_ > 1) comm_->allreduce_max(flags, 2);
  checkpoint_now = flags[1] > 0.0;
  return flags[0] > 0.0;
}

}  // namespace hpctrain
