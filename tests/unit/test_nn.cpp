// Layers, loss and model on the CPU backend: numerical gradient checks (batch > 1,
// odd sizes, random non-zero inputs) and arena bookkeeping.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "core/timer.hpp"
#include "gradient_check.hpp"
#include "nn/dense.hpp"
#include "nn/layer_profile.hpp"
#include "nn/model.hpp"
#include "nn/model_summary.hpp"
#include "nn/presets.hpp"
#include "nn/relu.hpp"

namespace hpctrain {
namespace {

using gradcheck::check_layer_gradients;
using gradcheck::check_model_gradients;
using gradcheck::random_vector;

TEST(GradientCheck, DenseBatch5Odd) {
  Dense layer("d", 7);
  check_layer_gradients(layer, {3, 1, 5}, 5);
}

// Per step: [steps, in] -> [steps, out] with one weight matrix.
TEST(GradientCheck, DensePerStep) {
  Dense layer("d", 4, Dense::Init::kHe, true);
  EXPECT_EQ(layer.output_dims({3, 5}), (Dims{3, 4}));
  EXPECT_EQ(layer.param_count(), size_t{4 * 5 + 4});
  check_layer_gradients(layer, {3, 5}, 2);
  Dense flat("f", 4, Dense::Init::kHe, true);
  EXPECT_THROW(flat.output_dims({7}), UsageError);
}

TEST(GradientCheck, Relu) {
  Relu layer("r");
  check_layer_gradients(layer, {11}, 3);
}

TEST(SoftmaxXent, GradientMatchesNumericalAndStatsCount) {
  CpuBackend be(1);
  const int rows = 5, cols = 7;
  std::vector<float> z = random_vector(rows * cols, 21, 2.0);
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1};
  std::vector<float> dz(z.size());
  LossStats stats;
  be.softmax_xent(z.data(), labels.data(), rows, cols, 1.0f, nullptr, dz.data(), &stats);
  EXPECT_EQ(stats.count, rows);
  auto loss = [&]() {
    LossStats s;
    be.softmax_xent(z.data(), labels.data(), rows, cols, 0.0f, nullptr, nullptr, &s);
    return s.loss_sum;
  };
  const float eps = 1e-3f;
  for (size_t i = 0; i < z.size(); ++i) {
    const float saved = z[i];
    z[i] = saved + eps;
    const double lp = loss();
    z[i] = saved - eps;
    const double lm = loss();
    z[i] = saved;
    EXPECT_NEAR(dz[i], (lp - lm) / (2 * eps), 2e-3) << i;
  }
}

TEST(SoftmaxXent, StableForHugeLogitsAndCountsCorrect) {
  CpuBackend be(1);
  const std::vector<float> z = {1000.0f, -1000.0f, 0.0f, 0.0f, 3000.0f, 2990.0f};
  const std::vector<int32_t> labels = {0, 2};
  LossStats s;
  std::vector<float> dz(6);
  be.softmax_xent(z.data(), labels.data(), 2, 3, 1.0f, nullptr, dz.data(), &s);
  EXPECT_TRUE(std::isfinite(s.loss_sum));
  EXPECT_NEAR(s.loss_sum, 0.0 + 10.0, 1e-3);  // first sample ~0, second ~ 10 + log(1+e^-10)
  EXPECT_EQ(s.correct, 1.0);
  for (float d : dz) EXPECT_TRUE(std::isfinite(d));
}

TEST(Model, MlpArenaLayoutAndDeterministicInit) {
  CpuBackend be(1);
  ModelConfig mc;
  mc.hidden = {192};
  Model a(be, build_layers(mc, 10, {1, 28, 28}), {1, 28, 28}, 4);
  EXPECT_EQ(a.param_count(), size_t{784 * 192 + 192 + 192 * 10 + 10});
  EXPECT_EQ(a.param_offset(2), size_t{784 * 192 + 192});
  EXPECT_EQ(a.output_dims(), Dims{10});
  a.init_params(5);
  Model b(be, build_layers(mc, 10, {1, 28, 28}), {1, 28, 28}, 4);
  b.init_params(5);
  EXPECT_EQ(a.params_sha256(), b.params_sha256());
  b.init_params(6);
  EXPECT_NE(a.params_sha256(), b.params_sha256());
}

TEST(Model, BackwardMatchesNumericalThroughWholeMlp) {
  CpuBackend be(1);
  ModelConfig mc;
  mc.hidden = {6, 5};
  const int batch = 3, classes = 4;
  Model m(be, build_layers(mc, classes, {2, 3}), {2, 3}, batch);
  m.init_params(9);
  std::vector<float> x = random_vector(batch * 6, 31);
  check_model_gradients(m, x, {1, 3, 0}, classes, /*stride=*/1, 2e-3);
}

TEST(Model, UnknownLayerTypeIsUsageError) {
  ModelConfig mc;
  mc.preset = "layers";
  mc.layers = {LayerSpec{"conv9", "", {}}};
  EXPECT_THROW(build_layers(mc, 10, {784}), UsageError);
}

// The host-clock phase marks of a CPU backend: each phase gets the time between its
// marks, the gap after the last mark counts from the second step on, and take_phases()
// starts new sums. Each sum is checked against the test's own clock readings around the
// marks (the same steady clock), never against a fixed time: a loaded machine's sleeps
// may last any length.
TEST(BackendPhases, HostClockSumsTheTimeBetweenMarks) {
  CpuBackend b(1);
  double before[2][kPhaseMarks], after[2][kPhaseMarks];
  for (int step = 0; step < 2; ++step) {
    for (int i = 0; i < kPhaseMarks; ++i) {
      before[step][i] = now_seconds();
      b.phase_mark(i);
      after[step][i] = now_seconds();
      // phase 1 the longest; a long open tail after the last mark, which must not count
      const int ms = i == 1 ? 30 : (step == 1 && i == kPhaseMarks - 1) ? 40 : 2;
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
  }
  const PhaseSeconds p = b.take_phases();
  for (int i = 0; i < kPhaseMarks; ++i) {
    double lo = 0, hi = 0;  // phase i runs from mark i to the next mark
    for (int step = 0; step < 2; ++step) {
      const bool last = i == kPhaseMarks - 1;
      if (last && step == 1) break;  // the open tail
      const int next_step = last ? step + 1 : step, next = last ? 0 : i + 1;
      lo += before[next_step][next] - after[step][i];
      hi += after[next_step][next] - before[step][i];
    }
    EXPECT_GE(p[i], lo) << "phase " << i;
    EXPECT_LE(p[i], hi) << "phase " << i;
  }
  EXPECT_GE(p[1], 0.060);                // two sleeps of 30 ms at least
  EXPECT_GE(p[kPhaseMarks - 1], 0.002);  // one gap between the steps (the final one is open)
  b.phase_mark(0);                       // after take_phases, mark 0 closes nothing
  const PhaseSeconds again = b.take_phases();
  for (double v : again) EXPECT_EQ(v, 0.0);
}

// inspect --time: a time for every layer's two passes and the step, and the clock leaves
// the parameters alone (no optimizer step).
TEST(LayerProfile, TimesEveryLayerAndTheStep) {
  CpuBackend b(1);
  ModelConfig mc;
  mc.preset = "cnn";
  mc.hidden.clear();
  Model m(b, build_layers(mc, 10, {1, 12, 12}), {1, 12, 12}, 5);
  m.init_params(1);
  const std::vector<float> before(m.params(), m.params() + m.param_count());
  const LayerTimes t = time_layers(m, 5, 10, 1, 3);
  EXPECT_EQ(t.batch, 5);
  EXPECT_GT(t.step_s, 0.0);
  ASSERT_EQ(t.forward_s.size(), m.layers().size());
  ASSERT_EQ(t.backward_s.size(), m.layers().size());
  EXPECT_GT(t.forward_s[0], 0.0);  // conv0
  EXPECT_GT(t.backward_s[0], 0.0);
  EXPECT_EQ(std::vector<float>(m.params(), m.params() + m.param_count()), before);
  const std::string table = model_summary(m, &t);
  EXPECT_NE(table.find("fwd_ms"), std::string::npos) << table;
  EXPECT_NE(table.find("step at batch 5"), std::string::npos) << table;
}

// A layer name wider than its column pushes the row's other columns along, whole (a fixed
// buffer cut them off from a name of about 110 characters).
TEST(ModelSummary, ALongNameKeepsTheRowWhole) {
  CpuBackend b(1);
  std::vector<std::unique_ptr<Layer>> layers;
  const std::string name(200, 'n');
  layers.push_back(std::make_unique<Dense>(name, 7));
  Model m(b, std::move(layers), {1, 1, 3}, 2);
  const std::string table = model_summary(m, nullptr);
  const size_t at = table.find(name);
  ASSERT_NE(at, std::string::npos) << table;
  const std::string line = table.substr(at, table.find('\n', at) - at);
  EXPECT_NE(line.find("dense"), std::string::npos) << line;
  EXPECT_NE(line.find(" 28 "), std::string::npos) << line;  // 3 x 7 + 7 parameters
}

}  // namespace
}  // namespace hpctrain
