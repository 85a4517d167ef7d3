// The batch plan of a run and the learning-rate scaling rule.
#include "train/run_plan.hpp"

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "train/async_sgd.hpp"
#include "train/exchange.hpp"

namespace hpctrain {

int64_t auto_steps_per_epoch(int64_t equal_plan_steps) { return equal_plan_steps - 1; }

BatchPlan plan_for_run(const Config& config, int64_t rows, const std::string& train_path,
                       const std::vector<int64_t>& weights) {
  const int world_size = static_cast<int>(weights.size());
  const TrainConfig& t = config.train;
  const bool global = t.batch_size_is == "global";
  const int64_t total = global ? t.batch_size : int64_t{t.batch_size} * world_size;
  if (total < world_size) {
    throw UsageError(config.source_file + ": train.batch_size: " + std::to_string(t.batch_size) +
                     " is smaller than the " + std::to_string(world_size) +
                     " ranks that share it (train.batch_size_is: global)");
  }
  if (rows < world_size) {
    throw UsageError(train_path + ": " + std::to_string(rows) + " samples cannot be shared by " +
                     std::to_string(world_size) + " ranks");
  }
  if (total > rows / t.accumulate_steps) {  // no rank's shard could hold its batch
    std::string what = std::to_string(t.batch_size);
    if (t.accumulate_steps > 1) {
      what += " x train.accumulate_steps " + std::to_string(t.accumulate_steps);
    }
    if (!global)
      what += " on " + std::to_string(world_size) + (world_size == 1 ? " rank" : " ranks");
    throw UsageError(config.source_file + ": train.batch_size: " + what + " is larger than the " +
                     std::to_string(rows) + " samples of " + train_path);
  }
  BatchPlan plan = plan_batches(rows, total, weights, t.accumulate_steps);
  const bool automatic = config.distributed.balance == "auto";
  if (automatic) plan.steps_per_epoch = auto_steps_per_epoch(plan.steps_per_epoch);
  if (plan.steps_per_epoch < 1) {
    const std::string what = t.accumulate_steps > 1
                                 ? " x train.accumulate_steps " + std::to_string(t.accumulate_steps)
                                 : "";
    const std::string per_epoch =
        automatic ? " (distributed.balance auto needs two steps per epoch)" : "";
    throw UsageError(config.source_file + ": train.batch_size: " + std::to_string(plan.batch[0]) +
                     what + " is larger than a rank's shard (" +
                     std::to_string(plan.shards.back().count) + " samples of " + train_path + ")" +
                     per_epoch);
  }
  if (automatic && plan.steps_per_epoch < 2) {
    // Each epoch's first step is not timed (a new loader's): one step leaves none to time.
    throw UsageError(config.source_file + ": distributed.balance: auto times the steps of an " +
                     "epoch but its first, and train.batch_size " + std::to_string(plan.batch[0]) +
                     " leaves one step per epoch (the last of " +
                     "an equal plan's given up): lower train.batch_size, or balance equal");
  }
  return plan;
}

BatchPlan plan_for_async(const Config& config, int world_size, int64_t rows,
                         const std::string& train_path) {
  BatchPlan plan;
  const int64_t batch = config.train.batch_size;
  plan.batch.assign(static_cast<size_t>(world_size), batch);
  plan.shards.assign(static_cast<size_t>(world_size), Shard{0, rows});
  plan.steps_per_epoch = rows / batch;
  if (plan.steps_per_epoch < 1) {
    throw UsageError(config.source_file + ": train.batch_size: " + std::to_string(batch) +
                     " is larger than the " + std::to_string(rows) + " samples of " + train_path);
  }
  return plan;
}

void check_world_size(const Config& config, int world_size, int64_t rows,
                      const std::string& train_path, size_t param_count) {
  if (exchange_strategy(config.distributed.strategy).decl.lockstep) {
    plan_for_run(config, rows, train_path, std::vector<int64_t>(world_size, 1));
    return;
  }
  async_layout(config.source_file, world_size, config.distributed.parameter_servers, param_count);
  plan_for_async(config, world_size, rows, train_path);
}

double lr_scale(const OptimizerConfig& optimizer, int batch_size, int64_t global_batch) {
  if (optimizer.lr_scaling == "none") return 1.0;
  const double reference = static_cast<double>(
      optimizer.lr_reference_batch > 0 ? optimizer.lr_reference_batch : batch_size);
  const double ratio = static_cast<double>(global_batch) / reference;
  return optimizer.lr_scaling == "linear" ? ratio : std::sqrt(ratio);
}

}  // namespace hpctrain
