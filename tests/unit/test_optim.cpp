// SGD and Adam arithmetic against hand-written references (and Adam against PyTorch's
// figures), and the learning-rate schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "checkpoint/checkpoint_state.hpp"
#include "optim/adam.hpp"
#include "optim/grad_clip.hpp"
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

// Four steps of Adam or AdamW on five parameters with a falling learning rate, against a
// double-precision reference of PyTorch's algorithm; returns the parameters.
std::vector<float> run_adam_reference(const std::string& name, double wd) {
  CpuBackend be(1);
  OptimizerConfig oc;
  oc.name = name;
  oc.weight_decay = wd;
  const size_t n = 5;
  Adam adam(be, oc, n, {ParamRange{0, n}});
  std::vector<float> p = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f};
  std::vector<double> ref_p(p.begin(), p.end()), m(n, 0.0), v(n, 0.0);
  const double b1 = oc.beta1, b2 = oc.beta2, eps = oc.eps;
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> g = {0.1f * step, -0.3f, 0.7f, 0.05f * step, 1.0f};
    const double lr = 0.1 / (step + 1);
    adam.step(p.data(), g.data(), lr, nullptr);
    const int t = step + 1;
    for (size_t i = 0; i < n; ++i) {
      double gi = g[i];
      if (name == "adamw") {
        ref_p[i] *= 1.0 - lr * wd;
      } else {
        gi += wd * ref_p[i];
      }
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      const double m_hat = m[i] / (1 - std::pow(b1, t)), v_hat = v[i] / (1 - std::pow(b2, t));
      ref_p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(p[i], ref_p[i], 2e-6) << name << " " << i;
  EXPECT_EQ(adam.state().at(2).data[0], 4.0f) << "step counter";
  return p;
}

// Figures from torch.optim.Adam / AdamW (PyTorch 1.13, foreach=False) on the same steps:
//   p = Parameter([1, -2, 0.5, 3, -0.25]); opt = Adam([p], lr=0.1, weight_decay=wd)
//   for s in range(4): p.grad = [0.1 s, -0.3, 0.7, 0.05 s, 1]; lr = 0.1 / (s + 1); opt.step()
void expect_pytorch(const std::vector<float>& got, const std::vector<float>& torch) {
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], torch[i], 1e-6) << i;
}

TEST(Adam, MatchesReferenceAndPyTorch) {
  expect_pytorch(run_adam_reference("adam", 0.0),
                 {0.913386762f, -1.79166675f, 0.291666657f, 2.91338658f, -0.458333343f});
}

TEST(Adam, L2WeightDecayMatchesReferenceAndPyTorch) {
  expect_pytorch(run_adam_reference("adam", 0.01),
                 {0.809273779f, -1.79168236f, 0.29167375f, 2.79887962f, -0.458328366f});
}

TEST(Adam, DecoupledWeightDecayMatchesReferenceAndPyTorch) {
  expect_pytorch(run_adam_reference("adamw", 0.01),
                 {0.911333501f, -1.78764892f, 0.290771514f, 2.90716958f, -0.457667083f});
}

TEST(Adam, SkippedStepChangesNothingNotEvenTheStepCount) {
  CpuBackend be(1);
  OptimizerConfig oc;
  oc.name = "adam";
  Adam skipped(be, oc, 3, {{0, 3}}), plain(be, oc, 3, {{0, 3}});
  std::vector<float> p = {1, 2, 3}, q = p;
  const std::vector<float> g = {0.5f, -1.0f, 2.0f};
  const float overflow = 1.0f, fine = 0.0f;
  skipped.step(p.data(), g.data(), 0.1, &overflow);
  EXPECT_EQ(p, q);
  for (const OptimizerSlot& slot : skipped.state()) {
    for (size_t i = 0; i < slot.size; ++i) EXPECT_EQ(slot.data[i], 0.0f) << slot.name;
  }
  // The next step is the first: the same as a fresh optimizer's first step.
  skipped.step(p.data(), g.data(), 0.1, &fine);
  plain.step(q.data(), g.data(), 0.1, nullptr);
  EXPECT_EQ(p, q);
}

// Every optimizer leaves frozen parameters and their state alone, weight decay included.
TEST(Optimizer, FrozenRangesAreUntouched) {
  for (const char* name : {"sgd", "adam", "adamw"}) {
    CpuBackend be(1);
    OptimizerConfig oc;
    oc.name = name;
    oc.weight_decay = 0.1;
    const auto opt = make_optimizer(be, oc, 6, {ParamRange{0, 2}, ParamRange{4, 2}});
    std::vector<float> p = {1, 1, 1, 1, 1, 1};
    const std::vector<float> g = {1, 1, 1, 1, 1, 1};
    opt->step(p.data(), g.data(), 0.1, nullptr);
    EXPECT_LT(p[0], 1.0f) << name;
    EXPECT_EQ(p[2], 1.0f) << name;
    EXPECT_EQ(p[3], 1.0f) << name;
    EXPECT_LT(p[5], 1.0f) << name;
    for (const OptimizerSlot& slot : opt->state()) {
      if (!slot.per_parameter) continue;
      EXPECT_NE(slot.data[0], 0.0f) << name << " " << slot.name;
      EXPECT_EQ(slot.data[2], 0.0f) << name << " " << slot.name << ": frozen, so no state";
    }
  }
}

TEST(Adam, StateSlots) {
  CpuBackend be(1);
  OptimizerConfig oc;
  oc.name = "adamw";
  Adam adam(be, oc, 6, {ParamRange{0, 6}});
  const std::vector<OptimizerSlot> slots = adam.state();
  ASSERT_EQ(slots.size(), 3u);
  EXPECT_STREQ(slots[0].name, kAdamFirstMomentArray);
  EXPECT_STREQ(slots[1].name, kAdamSecondMomentArray);
  EXPECT_STREQ(slots[2].name, kAdamStepArray);
  EXPECT_TRUE(slots[0].per_parameter && slots[1].per_parameter && !slots[2].per_parameter);
  EXPECT_EQ(slots[1].size, 6u);
  EXPECT_EQ(slots[2].size, 1u);
}

TEST(Optimizer, MakeOptimizerPicksByName) {
  CpuBackend be(1);
  OptimizerConfig oc;
  EXPECT_EQ(make_optimizer(be, oc, 4, {{0, 4}})->state().at(0).name, std::string(kVelocityArray));
  oc.momentum = 0.0;
  EXPECT_TRUE(make_optimizer(be, oc, 4, {{0, 4}})->state().empty()) << "plain SGD has no state";
  oc.name = "adamw";
  EXPECT_EQ(make_optimizer(be, oc, 4, {{0, 4}})->state().size(), 3u);
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

// Clipping by global norm over the trainable ranges (a frozen range between them is left
// alone), as torch.nn.utils.clip_grad_norm_: scaled by max_norm / (norm + 1e-6) when the
// norm is larger, untouched when it is not.
TEST(GradClip, GlobalNormOverTrainableRanges) {
  CpuBackend be(2);
  std::vector<float> g(100000);
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(std::sin(0.01 * i));
  const std::vector<ParamRange> trainable = {{0, 40000}, {60000, 40000}};
  double sq = 0;
  for (const ParamRange& r : trainable) {
    for (size_t i = r.offset; i < r.offset + r.count; ++i) sq += double(g[i]) * g[i];
  }
  const double norm = std::sqrt(sq);
  const std::vector<float> before = g;
  GradClipper(be, 1000.0f).clip(g.data(), trainable);  // norm ~ 224: no change
  EXPECT_EQ(g, before);
  GradClipper(be, 2.0f).clip(g.data(), trainable);
  const double coef = 2.0 / (norm + 1e-6);
  for (size_t i : {size_t{5}, size_t{39999}, size_t{60000}, size_t{99999}}) {
    EXPECT_NEAR(g[i], before[i] * coef, 1e-6) << i;
  }
  EXPECT_EQ(g[50000], before[50000]);  // frozen
}

}  // namespace
}  // namespace hpctrain
