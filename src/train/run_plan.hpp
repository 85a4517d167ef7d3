// What a run's config and world size make of the batch: the batch plan (train.batch_size,
// train.batch_size_is, train.accumulate_steps over the ranks) and the learning rate's
// scaling with the global batch (optimizer.lr_scaling). Local: every rank computes the
// same from the same inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/batch_plan.hpp"

namespace hpctrain {

// `weights`: one per rank (train/balance.hpp). Throws UsageError naming the config file and
// key when the batch cannot be shared (a global batch smaller than the ranks) or a rank
// gets no full step out of its share of `rows` (the training set of `train_path`). Under
// distributed.balance auto the steps per epoch are one fewer than the equal plan's, so that
// every later plan of the run has them (auto_steps_per_epoch).
BatchPlan plan_for_run(const Config& config, int64_t rows, const std::string& train_path,
                       const std::vector<int64_t>& weights);

// Strategy async: every rank's batch is train.batch_size and its share the whole set (a
// worker is handed batches as it goes); steps_per_epoch counts the batches of the epoch's
// one order. Throws UsageError when the set has fewer rows than one batch.
BatchPlan plan_for_async(const Config& config, int world_size, int64_t rows,
                         const std::string& train_path);

// What a run on `world_size` ranks would refuse for that rank count, checked without MPI
// (hpctrain inspect --ranks; the study driver checks each variant so): the batch plan over
// the `rows` of `train_path` (equal weights: the devices of distributed.balance weights are
// known only at run time) and, under strategy async, the parameter servers' layout of
// `param_count` parameters. Throws UsageError as the run would.
void check_world_size(const Config& config, int world_size, int64_t rows,
                      const std::string& train_path, size_t param_count);

// The steps per epoch of every plan of a run under balance auto, from its equal plan's: any
// plan of the same micro-batch total has at least this many (BatchPlan::steps_per_epoch).
int64_t auto_steps_per_epoch(int64_t equal_plan_steps);

// The factor optimizer.lr_scaling applies to the schedule for a global batch of
// `global_batch` samples (1 for none).
double lr_scale(const OptimizerConfig& optimizer, int batch_size, int64_t global_batch);

}  // namespace hpctrain
