// What a run's config and world size make of the batch: the batch plan (train.batch_size,
// train.batch_size_is, train.accumulate_steps over the ranks) and the learning rate's
// scaling with the global batch (optimizer.lr_scaling). Local: every rank computes the
// same from the same inputs.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "data/batch_plan.hpp"

namespace hpctrain {

// Throws UsageError naming the config file and key when the batch cannot be shared (a
// global batch smaller than the ranks) or no rank gets a full step out of its shard of
// `rows` (the training set of `train_path`).
BatchPlan plan_for_run(const Config& config, int64_t rows, const std::string& train_path,
                       int world_size);

// The factor optimizer.lr_scaling applies to the schedule for a global batch of
// `global_batch` samples (1 for none).
double lr_scale(const OptimizerConfig& optimizer, int batch_size, int64_t global_batch);

}  // namespace hpctrain
