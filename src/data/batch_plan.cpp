// The batch plan: one apportioning of the micro-batch by the weights, one of the rows by the
// resulting batches.
#include "data/batch_plan.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"

namespace hpctrain {

int64_t BatchPlan::global_batch() const {
  int64_t sum = 0;
  for (int64_t b : batch) sum += b;
  return sum * accumulate;
}

BatchPlan plan_batches(int64_t rows, int64_t total, const std::vector<int64_t>& weights,
                       int accumulate) {
  const auto ranks = static_cast<int64_t>(weights.size());
  HT_REQUIRE(ranks > 0 && total >= ranks, "plan_batches: bad arguments");
  // One sample to every rank first, the rest by weight, so no rank idles.
  std::vector<int64_t> batches = apportion(total - ranks, weights);
  for (int64_t& b : batches) ++b;
  return plan_from_batches(rows, batches, accumulate);
}

BatchPlan plan_from_batches(int64_t rows, const std::vector<int64_t>& batches, int accumulate) {
  HT_REQUIRE(!batches.empty() && accumulate >= 1, "plan_from_batches: bad arguments");
  for (int64_t b : batches) HT_REQUIRE(b >= 1, "plan_from_batches: a batch below 1");
  BatchPlan plan;
  plan.accumulate = accumulate;
  plan.batch = batches;
  // Rows in proportion to the batches, contiguous in rank order.
  const std::vector<int64_t> counts = apportion(rows, plan.batch);
  int64_t begin = 0;
  plan.steps_per_epoch = std::numeric_limits<int64_t>::max();
  for (size_t r = 0; r < counts.size(); ++r) {
    plan.shards.push_back({begin, counts[r]});
    begin += counts[r];
    plan.steps_per_epoch = std::min(plan.steps_per_epoch, counts[r] / (plan.batch[r] * accumulate));
  }
  return plan;
}

}  // namespace hpctrain
