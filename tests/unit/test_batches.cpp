// How a step's samples are shared and scaled: unequal per-rank batches summed with the
// global scale give one large batch's gradient; the run's batch plan from the config
// (per-rank or global batch, micro-batches) and its errors; the learning-rate scaling rule;
// balancing the ranks by device or by measured speed; the async servers' slices.
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
#include "train/async_sgd.hpp"
#include "train/balance.hpp"
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

std::vector<int64_t> equal(int ranks) { return std::vector<int64_t>(ranks, 1); }

Config config_with(int batch, const std::string& batch_is, int accumulate) {
  Config c;
  c.source_file = "run.yaml";
  c.train.batch_size = batch;
  c.train.batch_size_is = batch_is;
  c.train.accumulate_steps = accumulate;
  return c;
}

TEST(RunPlan, PerRankGlobalAndMicroBatches) {
  BatchPlan p = plan_for_run(config_with(64, "per_rank", 1), 55000, "t.h5", equal(2));
  EXPECT_EQ(p.batch, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(p.steps_per_epoch, 429);
  EXPECT_EQ(p.global_batch(), 128);
  p = plan_for_run(config_with(128, "global", 1), 55000, "t.h5", equal(3));
  EXPECT_EQ(p.batch, (std::vector<int64_t>{43, 43, 42}));
  EXPECT_EQ(p.global_batch(), 128);
  p = plan_for_run(config_with(32, "per_rank", 4), 55000, "t.h5", equal(1));
  EXPECT_EQ(p.global_batch(), 128);
  EXPECT_EQ(p.steps_per_epoch, 55000 / 128);
}

TEST(RunPlan, ErrorsNameTheKey) {
  try {
    plan_for_run(config_with(2, "global", 1), 1000, "t.h5", equal(3));
    FAIL() << "a global batch of 2 over 3 ranks";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run.yaml: train.batch_size: 2 is smaller than the 3 ranks that share it "
              "(train.batch_size_is: global)");
  }
  try {
    plan_for_run(config_with(64, "per_rank", 4), 500, "t.h5", equal(2));
    FAIL() << "4 micro-batches of 64 from 250 rows";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run.yaml: train.batch_size: 64 x train.accumulate_steps 4 on 2 ranks is larger "
              "than the 500 samples of t.h5");
  }
  EXPECT_THROW(plan_for_run(config_with(1, "per_rank", 1), 2, "t.h5", equal(3)), UsageError);
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

// Auto balance: batches in proportion to the measured speeds, each at most doubled or
// halved per epoch and never above the cap, always adding up to the same total.
TEST(Balance, BatchesFollowTheRatesWithinBounds) {
  // A rank 3x slower than the other: 96 and 32 of 128 in one step (within the bounds).
  EXPECT_EQ(balanced_batches({64, 64}, {300.0, 100.0}, 128), (std::vector<int64_t>{96, 32}));
  // 12x: the slow rank's share may only halve per epoch, and the fast one stays under the cap.
  EXPECT_EQ(balanced_batches({64, 64}, {1200.0, 100.0}, 100), (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(balanced_batches({96, 32}, {1200.0, 100.0}, 100), (std::vector<int64_t>{100, 28}));
  for (const std::vector<double>& rates :
       {std::vector<double>{1, 1, 1}, {5, 1, 1}, {1, 2, 3}, {1e6, 1, 1e-3}}) {
    const std::vector<int64_t> b = balanced_batches({43, 43, 42}, rates, 86);
    EXPECT_EQ(b[0] + b[1] + b[2], 128);
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_GE(b[r], 21) << r;
      EXPECT_LE(b[r], 86) << r;
    }
  }
  EXPECT_EQ(auto_batch_cap(128, 2), 128 - 1);
  EXPECT_EQ(auto_batch_cap(128, 4), 64);
}

TEST(Balance, WeightsByDeviceAndTheirErrors) {
  Config c;
  c.source_file = "run.yaml";
  EXPECT_EQ(balance_weights(c, {"cuda", "cpu"}), (std::vector<int64_t>{1, 1}));
  c.distributed.balance = "weights";
  c.distributed.cuda_weight = 12;
  const std::vector<int64_t> w = balance_weights(c, {"cuda", "cpu", "cuda"});
  EXPECT_NEAR(static_cast<double>(w[0]) / static_cast<double>(w[1]), 12.0, 1e-4);
  EXPECT_EQ(w[2], w[0]);
  try {
    balance_weights(c, {"cpu", "cpu"});
    FAIL() << "a GPU weight without a GPU rank";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run.yaml: distributed.cuda_weight: 12 is given, but no rank computes on cuda");
  }
}

// Strategy async: the servers' slices of the parameter arena.
TEST(AsyncLayout, ServersHoldContiguousEqualSlices) {
  const size_t n = 152650;  // the MLP 784-192-10
  const AsyncLayout two = async_layout("c.yaml", 4, 2, n);
  EXPECT_EQ(two.workers, 2);
  ASSERT_EQ(two.slices.size(), 2u);
  EXPECT_EQ(two.slices[0].offset, 0u);
  EXPECT_EQ(two.slices[0].count, n / 2);
  EXPECT_EQ(two.slices[1].offset, n / 2);
  EXPECT_EQ(two.slices[1].count, n / 2);
  EXPECT_TRUE(two.is_server(2) && two.is_server(3) && !two.is_server(1));
  EXPECT_EQ(two.server_rank(1), 3);
  const AsyncLayout three = async_layout("c.yaml", 5, 3, 10);
  size_t next = 0;
  for (const ParamRange& r : three.slices) {
    EXPECT_EQ(r.offset, next);
    EXPECT_TRUE(r.count == 3 || r.count == 4);
    next += r.count;
  }
  EXPECT_EQ(next, 10u);
}

TEST(AsyncLayout, ServersMustLeaveAWorker) {
  try {
    async_layout("c.yaml", 2, 2, 100);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml: distributed.parameter_servers: 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(AsyncLayout, ServerUpdatesTrainableRangesInItsSlice) {
  const std::vector<ParamRange> trainable = {{0, 10}, {20, 10}};
  const std::vector<ParamRange> in = ranges_within(trainable, {5, 20});
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].offset, 5u);
  EXPECT_EQ(in[0].count, 5u);
  EXPECT_EQ(in[1].offset, 20u);
  EXPECT_EQ(in[1].count, 5u);
  EXPECT_TRUE(ranges_within(trainable, {10, 10}).empty());
}

}  // namespace
}  // namespace hpctrain
