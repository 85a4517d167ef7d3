// SGD arithmetic against a hand-written reference and the learning-rate schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/sgd.hpp"

namespace hpctrain {
namespace {

void run_sgd_reference(bool nesterov, double momentum, double wd) {
  CpuBackend be(1);
  OptimizerConfig oc;
  oc.momentum = momentum;
  oc.nesterov = nesterov;
  oc.weight_decay = wd;
  const size_t n = 5;
  Sgd sgd(be, oc, n, {ParamRange{0, n}});
  std::vector<float> p = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f};
  std::vector<double> ref_p(p.begin(), p.end()), ref_v(n, 0.0);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> g = {0.1f * step, -0.3f, 0.7f, 0.05f * step, 1.0f};
    const double lr = 0.1 / (step + 1);
    sgd.step(p.data(), g.data(), lr, nullptr);
    for (size_t i = 0; i < n; ++i) {
      const double gi = g[i] + wd * ref_p[i];
      ref_v[i] = momentum * ref_v[i] + gi;
      const double upd = momentum == 0.0 ? gi : (nesterov ? gi + momentum * ref_v[i] : ref_v[i]);
      ref_p[i] -= lr * upd;
    }
  }
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(p[i], ref_p[i], 1e-5) << i;
}

TEST(Sgd, PlainMatchesReference) { run_sgd_reference(false, 0.0, 0.0); }
TEST(Sgd, MomentumMatchesReference) { run_sgd_reference(false, 0.9, 0.0); }
TEST(Sgd, NesterovWithWeightDecayMatchesReference) { run_sgd_reference(true, 0.9, 1e-2); }

TEST(Sgd, FrozenRangeIsUntouched) {
  CpuBackend be(1);
  OptimizerConfig oc;
  oc.momentum = 0.9;
  oc.weight_decay = 0.1;
  Sgd sgd(be, oc, 6, {ParamRange{0, 2}, ParamRange{4, 2}});
  std::vector<float> p = {1, 1, 1, 1, 1, 1};
  const std::vector<float> g = {1, 1, 1, 1, 1, 1};
  sgd.step(p.data(), g.data(), 0.1, nullptr);
  EXPECT_LT(p[0], 1.0f);
  EXPECT_EQ(p[2], 1.0f);
  EXPECT_EQ(p[3], 1.0f);
  EXPECT_LT(p[5], 1.0f);
}

TEST(LrSchedule, ConstantAndWarmup) {
  OptimizerConfig oc;
  oc.lr = 0.1;
  LrSchedule constant(oc, 10, 5);
  EXPECT_DOUBLE_EQ(constant.at(0), 0.1);
  EXPECT_DOUBLE_EQ(constant.at(49), 0.1);
  oc.schedule.warmup_epochs = 2;
  LrSchedule warm(oc, 10, 5);
  EXPECT_NEAR(warm.at(0), 0.1 * 0.05, 1e-12);  // 1 of 20 warm-up steps done
  EXPECT_NEAR(warm.at(9), 0.05, 1e-12);
  EXPECT_NEAR(warm.at(19), 0.1, 1e-12);
  EXPECT_NEAR(warm.at(30), 0.1, 1e-12);
}

TEST(LrSchedule, StepDecaysEveryStepEpochs) {
  OptimizerConfig oc;
  oc.lr = 1.0;
  oc.schedule.type = ScheduleType::kStep;
  oc.schedule.step_epochs = 2;
  oc.schedule.gamma = 0.5;
  LrSchedule s(oc, 10, 10);
  EXPECT_DOUBLE_EQ(s.at(0), 1.0);
  EXPECT_DOUBLE_EQ(s.at(19), 1.0);
  EXPECT_DOUBLE_EQ(s.at(20), 0.5);
  EXPECT_DOUBLE_EQ(s.at(45), 0.25);
}

TEST(LrSchedule, CosineFallsToMinLr) {
  OptimizerConfig oc;
  oc.lr = 1.0;
  oc.schedule.type = ScheduleType::kCosine;
  oc.schedule.min_lr = 0.1;
  LrSchedule s(oc, 10, 4);
  EXPECT_NEAR(s.at(19), 0.1 + 0.9 * 0.5, 1e-9);  // halfway
  EXPECT_NEAR(s.at(39), 0.1, 1e-9);              // end
  EXPECT_GT(s.at(5), s.at(25));
}

}  // namespace
}  // namespace hpctrain
