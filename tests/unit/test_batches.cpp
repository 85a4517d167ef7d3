// How a step's samples are shared and scaled: unequal per-rank batches summed with the
// global scale give one large batch's gradient; the run's batch plan from the config
// (per-rank or global batch, micro-batches) and its errors; the learning-rate scaling rule.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "gradient_check.hpp"
#include "nn/model.hpp"
#include "nn/presets.hpp"
#include "optim/lr_schedule.hpp"
#include "train/run_plan.hpp"

namespace hpctrain {
namespace {

using gradcheck::expect_close;
using gradcheck::random_vector;

// The gradient of `rows` rows of x (from `first`) with the loss gradient scaled by
// 1 / `global`: one rank's share of a step.
std::vector<float> share_gradient(const std::vector<float>& x, const std::vector<int32_t>& labels,
                                  int first, int rows, int global) {
  CpuBackend be(1);
  ModelConfig mc;
  mc.hidden = {9, 7};
  const Dims in = {2, 3, 2};
  Model m(be, build_layers(mc, 4, in), in, rows);
  m.init_params(5);  // every "rank" starts from the same parameters
  LossStats stats;
  const Tensor& logits = m.forward(x.data() + first * 12, rows, /*training=*/true);
  be.softmax_xent(logits.data, labels.data() + first, rows, 4, 1.0f / static_cast<float>(global),
                  nullptr, m.dlogits(), &stats);
  m.backward();
  return std::vector<float>(m.grads(), m.grads() + m.param_count());
}

// Ranks with batches 3, 5 and 1, each scaling by the 9 samples of the step, summed (what
// strategy allreduce does): the gradient of one rank with the 9 rows concatenated.
TEST(UnevenBatches, SummedSharesEqualOneConcatenatedBatch) {
  const int total = 9;
  const std::vector<float> x = random_vector(total * 12, 3);
  const std::vector<int32_t> labels = {0, 3, 1, 2, 2, 0, 1, 3, 3};
  const std::vector<float> whole = share_gradient(x, labels, 0, total, total);
  std::vector<float> sum(whole.size(), 0.0f);
  int first = 0;
  for (const int rows : {3, 5, 1}) {
    const std::vector<float> g = share_gradient(x, labels, first, rows, total);
    for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    first += rows;
  }
  expect_close(sum, whole, 1e-5, "summed shares");
  // The per-rank mean (what 1 / rank batch would give) is not the same thing.
  const std::vector<float> mean_of_first = share_gradient(x, labels, 0, 3, 3);
  double diff = 0;
  for (size_t i = 0; i < whole.size(); ++i) diff += std::fabs(mean_of_first[i] - whole[i]);
  EXPECT_GT(diff, 1e-3);
}

Config config_with(int batch, const std::string& batch_is, int accumulate) {
  Config c;
  c.source_file = "run.yaml";
  c.train.batch_size = batch;
  c.train.batch_size_is = batch_is;
  c.train.accumulate_steps = accumulate;
  return c;
}

TEST(RunPlan, PerRankGlobalAndMicroBatches) {
  BatchPlan p = plan_for_run(config_with(64, "per_rank", 1), 55000, "t.h5", 2);
  EXPECT_EQ(p.batch, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(p.steps_per_epoch, 429);
  EXPECT_EQ(p.global_batch(), 128);
  p = plan_for_run(config_with(128, "global", 1), 55000, "t.h5", 3);
  EXPECT_EQ(p.batch, (std::vector<int64_t>{43, 43, 42}));
  EXPECT_EQ(p.global_batch(), 128);
  p = plan_for_run(config_with(32, "per_rank", 4), 55000, "t.h5", 1);
  EXPECT_EQ(p.global_batch(), 128);
  EXPECT_EQ(p.steps_per_epoch, 55000 / 128);
}

TEST(RunPlan, ErrorsNameTheKey) {
  try {
    plan_for_run(config_with(2, "global", 1), 1000, "t.h5", 3);
    FAIL() << "a global batch of 2 over 3 ranks";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run.yaml: train.batch_size: 2 is smaller than the 3 ranks that share it "
              "(train.batch_size_is: global)");
  }
  try {
    plan_for_run(config_with(64, "per_rank", 4), 500, "t.h5", 2);
    FAIL() << "4 micro-batches of 64 from 250 rows";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run.yaml: train.batch_size: 64 x train.accumulate_steps 4 is larger than a "
              "rank's shard (250 samples of t.h5)");
  }
  EXPECT_THROW(plan_for_run(config_with(1, "per_rank", 1), 2, "t.h5", 3), UsageError);
}

TEST(LrScaling, LinearSqrtAndNone) {
  OptimizerConfig o;
  EXPECT_EQ(lr_scale(o, 128, 512), 1.0);
  o.lr_scaling = "linear";
  EXPECT_EQ(lr_scale(o, 128, 512), 4.0);
  o.lr_reference_batch = 256;
  EXPECT_EQ(lr_scale(o, 128, 512), 2.0);
  o.lr_scaling = "sqrt";
  EXPECT_DOUBLE_EQ(lr_scale(o, 128, 512), std::sqrt(2.0));
  // The factor multiplies the whole schedule, warm-up included.
  o.lr = 0.1;
  o.schedule.warmup_epochs = 1;
  const LrSchedule plain(o, 10, 5), scaled(o, 10, 5, 4.0);
  for (int64_t step : {0, 4, 9, 30}) EXPECT_DOUBLE_EQ(scaled.at(step), 4.0 * plain.at(step));
}

}  // namespace
}  // namespace hpctrain
