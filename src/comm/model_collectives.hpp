// Collectives over model memory (parameters, gradients, model state) across the ranks,
// for the exchange strategies (train/exchange.hpp): on the device through the backend's collectives
// (NCCL) where the backend has them and each rank owns its device, else hpctrain's ring or
// MPI_Allreduce on host memory, staged through a pinned host copy when the backend's
// memory is not host memory. Every collective must be called by every rank in the same
// order. Used from the training thread only.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "config/config.hpp"

namespace hpctrain {

class ModelCollectives {
 public:
  // Collective: picks device collectives for algorithm `auto` or `nccl` when the backend
  // has them and no two ranks share a device (`nccl` where they do is a UsageError naming
  // `source_file`), else the host algorithm (ring unless `mpi`). `max_floats`: the largest
  // array any collective will move (sizes the host staging buffer).
  ModelCollectives(const std::string& source_file, AllreduceAlgorithm requested, Backend& backend,
                   Communicator& comm, size_t max_floats);
  ~ModelCollectives();
  ModelCollectives(const ModelCollectives&) = delete;
  ModelCollectives& operator=(const ModelCollectives&) = delete;

  Backend& backend() const { return backend_; }
  Communicator& comm() const { return comm_; }
  int world_size() const { return world_size_; }
  // True when the collectives run on the device (NCCL).
  bool on_device() const { return on_device_; }
  // The algorithm of host collectives: ring or mpi.
  AllreduceAlgorithm host_algorithm() const { return host_algorithm_; }

  // data[0, n) summed over the ranks, in place.
  void allreduce_sum(float* data, size_t n);
  // data[0, n) averaged over the ranks, in place.
  void average(float* data, size_t n);
  // data[0, n) of rank 0 on every rank.
  void broadcast_from_rank0(float* data, size_t n);

 private:
  // Runs the collective f on n floats of model memory at `data` as host memory: in place
  // when the backend's memory is host memory, else on a copy in stage_ (copied back to the
  // device when write_back). Skipped on a single rank, where every collective is the
  // identity (and the copies would cost a device round trip per step).
  template <typename F>
  void on_host(float* data, size_t n, bool write_back, F&& f);

  Backend& backend_;
  Communicator& comm_;
  int rank_, world_size_;
  bool on_device_ = false;
  AllreduceAlgorithm host_algorithm_ = AllreduceAlgorithm::kRing;
  // Host staging for a backend whose memory is not host memory (Backend::host_accessible).
  std::vector<float> stage_;
  std::unique_ptr<float, std::function<void(float*)>> stage_pin_;  // unpins stage_
};

}  // namespace hpctrain
