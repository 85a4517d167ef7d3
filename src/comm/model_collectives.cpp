// Collectives over model memory: the choice between device collectives (NCCL) and host
// algorithms, and the staging of device memory through pinned host memory for the latter.
#include "comm/model_collectives.hpp"

#include <string>

#include "comm/device_group.hpp"
#include "comm/param_average.hpp"
#include "core/error.hpp"

namespace hpctrain {

ModelCollectives::ModelCollectives(const std::string& source_file, AllreduceAlgorithm requested,
                                   Backend& backend, Communicator& comm, size_t max_floats)
    : backend_(backend), comm_(comm), rank_(comm.rank()), world_size_(comm.size()) {
  host_algorithm_ =
      requested == AllreduceAlgorithm::kMpi ? AllreduceAlgorithm::kMpi : AllreduceAlgorithm::kRing;
  if (!backend_.host_accessible()) {
    stage_.resize(max_floats);
    // Pinned, so that the staging copies of host collectives run at DMA speed.
    backend_.pin_host(stage_.data(), stage_.size() * sizeof(float));
    Backend* b = &backend_;
    stage_pin_ = {stage_.data(), [b](float* p) { b->unpin_host(p); }};
  }
  // Device collectives where every rank has them, agreed on: with a rank on the CPU
  // (cpu_ranks) among GPU ranks every rank takes the host path (else the GPU ranks would
  // wait in NCCL's set-up for a rank that never joins, and it for them in its first
  // collective). (distributed.algorithm: nccl was refused at set-up on a rank without it.)
  double lacking = backend_.has_device_collectives() ? 0.0 : 1.0;
  comm_.allreduce_max(&lacking, 1);
  if (lacking > 0.0) return;
  if (requested != AllreduceAlgorithm::kAuto && requested != AllreduceAlgorithm::kNccl) return;
  // auto skips NCCL on one rank, where every collective is the identity; nccl asked for
  // by name runs it (a one-rank communicator).
  if (world_size_ == 1 && requested == AllreduceAlgorithm::kAuto) return;
  if (ranks_share_a_device(comm_, backend_.device_id())) {
    if (requested == AllreduceAlgorithm::kNccl) {
      throw UsageError(source_file +
                       ": distributed.algorithm: nccl needs one GPU per rank, and some ranks "
                       "share one (use ring or mpi, or fewer ranks per node)");
    }
    return;
  }
  join_device_collectives(comm_, backend_);
  on_device_ = true;
}

ModelCollectives::~ModelCollectives() = default;

template <typename F>
void ModelCollectives::on_host(float* data, size_t n, bool write_back, F&& f) {
  if (world_size_ == 1) return;
  if (backend_.host_accessible()) {
    f(data);
    return;
  }
  backend_.copy_to_host(stage_.data(), data, n * sizeof(float));
  f(stage_.data());
  if (write_back) backend_.copy_to_device(data, stage_.data(), n * sizeof(float));
}

void ModelCollectives::allreduce_sum(float* data, size_t n) {
  if (on_device_) {
    backend_.allreduce_sum(data, n);
    return;
  }
  on_host(data, n, true, [&](float* g) { comm_.allreduce_sum(g, n, host_algorithm_); });
}

void ModelCollectives::average(float* data, size_t n) {
  if (on_device_) {
    backend_.allreduce_sum(data, n);
    backend_.scale(data, n, 1.0f / static_cast<float>(world_size_));
    return;
  }
  on_host(data, n, true, [&](float* p) { average_parameters(comm_, p, n); });
}

void ModelCollectives::broadcast_from_rank0(float* data, size_t n) {
  if (on_device_) {
    backend_.broadcast(data, n, 0);
    return;
  }
  on_host(data, n, rank_ != 0, [&](float* p) { comm_.broadcast(p, n * sizeof(float), 0); });
}

}  // namespace hpctrain
