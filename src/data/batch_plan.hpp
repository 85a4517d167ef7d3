// How the ranks share a step's samples: each rank's batch, its contiguous share of the
// training rows (in proportion to its batch, so every rank takes the same number of steps
// per epoch), the micro-batches per optimizer step, and the optimizer steps per epoch.
// A pure function of its inputs, so every rank computes the same plan.
#pragma once

#include <cstdint>
#include <vector>

#include "data/sampler.hpp"

namespace hpctrain {

struct BatchPlan {
  std::vector<int64_t> batch;   // per rank: samples of one micro-batch
  std::vector<Shard> shards;    // per rank: training rows, contiguous, in rank order
  int accumulate = 1;           // micro-batches per optimizer step
  int64_t steps_per_epoch = 0;  // optimizer steps every rank can take with full batches

  // Samples of one optimizer step over all ranks: sum of batch x accumulate.
  int64_t global_batch() const;
};

// `total`: the samples of one micro-batch over all ranks, divided by `weights` (one per
// rank, > 0) by largest remainder; each rank gets at least one (total >= ranks). `rows`:
// the training set. With equal weights and total = b x ranks, every rank has batch b and
// the shards of shard_for_rank.
BatchPlan plan_batches(int64_t rows, int64_t total, const std::vector<int64_t>& weights,
                       int accumulate);

// The plan of the given per-rank batches (each >= 1): rows in proportion to them.
BatchPlan plan_from_batches(int64_t rows, const std::vector<int64_t>& batches, int accumulate);

}  // namespace hpctrain
