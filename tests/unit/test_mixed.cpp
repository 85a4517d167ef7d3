// Mixed precision on the CPU backend: rounding of the 16-bit types, every layer type
// computing with bfloat16 / float16 activations against float32, the weights' compute copy
// following parameter changes, in-place operations on 16-bit buffers, dropout masks as
// stored, and the dynamic loss scaler (scale, unscale, skip, backoff, growth, save).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "core/convert.hpp"
#include "gradient_check.hpp"
#include "nn/model.hpp"
#include "nn/presets.hpp"
#include "optim/sgd.hpp"
#include "train/loss_scaler.hpp"

namespace hpctrain {
namespace {

using gradcheck::random_vector;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST(Bfloat16, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  // Exactly halfway between two bfloat16 values: to the even one.
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000u)), 0x3f80);
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000u)), 0x3f82);
  // Just above halfway: up.
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  // The largest float rounds up to infinity; infinities and zeros stay.
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  // NaN stays NaN (a payload that would round to infinity is kept quiet).
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  // Widening is exact, so a bfloat16 survives the round trip.
  for (uint32_t b = 0; b < 0x10000u; b += 7) {
    const float f = bf16_to_float(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(float_to_bf16(f), b);
    }
  }
}

TEST(Dtype, RoundToAndBulkConversions) {
  EXPECT_EQ(round_to(DType::kF32, 1.1f), 1.1f);
  EXPECT_EQ(round_to(DType::kBF16, 1.1f), bf16_to_float(float_to_bf16(1.1f)));
  EXPECT_NE(round_to(DType::kBF16, 1.1f), 1.1f);
  EXPECT_TRUE(std::isinf(round_to(DType::kF16, 65520.0f)));  // above float16's range
  EXPECT_FALSE(std::isinf(round_to(DType::kBF16, 65520.0f)));
  const std::vector<float> x = random_vector(101, 3);
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<std::byte> stored(x.size() * dtype_size(t));
    std::vector<float> back(x.size());
    from_float(t, x.data(), stored.data(), x.size());
    to_float(t, stored.data(), back.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], round_to(t, x[i])) << to_string(t);
  }
}

// Every layer type once: conv2d with bias, batchnorm, relu, maxpool, a projection basic
// block, dropout, avgpool, global average pooling, flatten, and the dense classifier.
ModelConfig all_layers() {
  ModelConfig c;
  c.preset = "layers";
  c.hidden.clear();
  c.layers = {
      {.type = "conv2d",
       .values = {{"filters", int64_t{6}}, {"kernel", int64_t{3}}, {"padding", int64_t{1}}}},
      {.type = "batchnorm"},
      {.type = "relu"},
      {.type = "maxpool", .values = {{"kernel", int64_t{2}}, {"stride", int64_t{2}}}},
      {.type = "basic_block", .values = {{"filters", int64_t{8}}, {"stride", int64_t{2}}}},
      {.type = "dropout", .values = {{"rate", 0.25}}},
      {.type = "avgpool", .values = {{"kernel", int64_t{2}}, {"stride", int64_t{1}}}},
      {.type = "global_avgpool"},
      {.type = "flatten"},
  };
  return c;
}

struct Step {
  std::vector<float> logits, grads, state;
  double loss = 0;
};

// One training step of the all-layers model on `be` from the same parameters and input.
Step train_step(CpuBackend& be, const std::vector<float>& input) {
  const Dims in = {3, 12, 10};
  const int batch = 5, classes = 7;
  Model m(be, build_layers(all_layers(), classes, in), in, batch);
  m.init_params(42);
  const DType t = be.act_type();
  std::vector<std::byte> x(input.size() * dtype_size(t));
  from_float(t, input.data(), x.data(), input.size());
  const std::vector<int32_t> labels = {0, 3, 6, 2, 3};
  const Tensor& logits = m.forward(x.data(), batch, /*training=*/true, 9);
  LossStats stats;
  be.softmax_xent(logits.data, labels.data(), batch, classes, 1.0f / batch, nullptr, m.dlogits(),
                  &stats);
  m.backward();
  Step s;
  s.logits.resize(static_cast<size_t>(logits.elems()));
  to_float(t, logits.data, s.logits.data(), s.logits.size());
  s.grads.assign(m.grads(), m.grads() + m.param_count());
  s.state.resize(m.state_count());
  m.get_state(s.state.data());
  s.loss = stats.loss_sum / batch;
  return s;
}

// 16-bit values of type t (bfloat16 or float16) nearest to v.
std::vector<uint16_t> to16(DType t, const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = t == DType::kBF16 ? float_to_bf16(v[i]) : float_to_half(v[i]);
  }
  return out;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// |a - b| relative to |b| over the whole vector (norms), and their cosine.
std::pair<double, double> compare(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, na = 0, nb = 0, dot = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
    dot += static_cast<double>(a[i]) * b[i];
  }
  return {std::sqrt(diff / nb), dot / std::sqrt(na * nb)};
}

TEST(MixedPrecision, EveryLayerTypeTracksFloat32) {
  const std::vector<float> raw = random_vector(5 * 3 * 12 * 10, 8);
  for (DType t : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(to_string(t));
    // The float32 reference sees the same (rounded) input.
    std::vector<float> input(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) input[i] = round_to(t, raw[i]);
    CpuBackend f32(1), lp(1, CpuBackend::kDefaultConvChunkBytes, false, t);
    const Step want = train_step(f32, input);
    const Step got = train_step(lp, input);
    // bfloat16 keeps 8 significant bits, float16 11: errors of a few units in the last
    // place per layer.
    const double tol = t == DType::kBF16 ? 3e-2 : 5e-3;
    for (size_t i = 0; i < want.logits.size(); ++i) {
      EXPECT_NEAR(got.logits[i], want.logits[i], tol * max_abs(want.logits)) << i;
    }
    EXPECT_NEAR(got.loss, want.loss, tol * want.loss);
    const auto [grad_err, grad_cos] = compare(got.grads, want.grads);
    EXPECT_LT(grad_err, 4 * tol);
    EXPECT_GT(grad_cos, 1 - tol);
    const auto [state_err, state_cos] = compare(got.state, want.state);
    EXPECT_LT(state_err, tol);
    // And it is not float32 in disguise: 16-bit storage changes the values.
    EXPECT_NE(got.logits, want.logits);
  }
}

TEST(MixedPrecision, ComputeCopyFollowsParameterChanges) {
  CpuBackend be(1, CpuBackend::kDefaultConvChunkBytes, false, DType::kBF16);
  const Dims in = {20};
  ModelConfig c;
  c.hidden = {16};
  Model m(be, build_layers(c, 4, in), in, 3);
  m.init_params(1);
  const std::vector<uint16_t> x = to16(DType::kBF16, random_vector(3 * 20, 2));
  auto logits = [&] {
    const Tensor& y = m.forward(x.data(), 3, false);
    std::vector<float> out(static_cast<size_t>(y.elems()));
    to_float(DType::kBF16, y.data, out.data(), out.size());
    return out;
  };
  const std::vector<float> before = logits();
  EXPECT_GT(max_abs(before), 0.0);
  // Writing through mutable_params(): doubling the last layer's weights and biases doubles
  // the logits (exactly: doubling is exact in bfloat16).
  const size_t last = m.param_offset(m.layers().size() - 1);
  float* p = m.mutable_params();
  for (size_t i = last; i < m.param_count(); ++i) p[i] *= 2;
  const std::vector<float> doubled = logits();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(doubled[i], 2 * before[i]) << i;
  // set_params() too.
  std::vector<float> host(m.param_count(), 0.0f);
  m.set_params(host.data());
  EXPECT_EQ(max_abs(logits()), 0.0);
}

TEST(MixedPrecision, InPlaceOperationsOn16BitBuffers) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(to_string(t));
    CpuBackend be(2, CpuBackend::kDefaultConvChunkBytes, false, t);
    const size_t n = 70001;  // several parts for the thread team
    const std::vector<float> a = random_vector(n, 4), b = random_vector(n, 5);
    const std::vector<uint16_t> x = to16(t, a), y = to16(t, b);
    std::vector<uint16_t> ref(n);
    auto value = [&](const std::vector<uint16_t>& v, size_t i) {
      float f;
      to_float(t, &v[i], &f, 1);
      return f;
    };
    // relu in place == out of place == the rounded float32 result.
    be.relu_forward(x.data(), ref.data(), n);
    std::vector<uint16_t> inplace = x;
    be.relu_forward(inplace.data(), inplace.data(), n);
    EXPECT_EQ(inplace, ref);
    for (size_t i = 0; i < n; i += 997) EXPECT_EQ(value(ref, i), std::max(value(x, i), 0.0f));
    // y = y + x (the residual addition's form): each sum rounded once.
    std::vector<uint16_t> sum = y;
    be.add(sum.data(), x.data(), sum.data(), n);
    for (size_t i = 0; i < n; i += 997) {
      EXPECT_EQ(value(sum, i), round_to(t, value(y, i) + value(x, i))) << i;
    }
    // gemm with beta != 0 reads C before writing it.
    const int m = 3, k = 4, cols = 5;
    const std::vector<float> af = random_vector(m * k, 6), bf = random_vector(k * cols, 7),
                             cf = random_vector(m * cols, 8);
    const std::vector<uint16_t> a16 = to16(t, af), b16 = to16(t, bf);
    std::vector<uint16_t> c16 = to16(t, cf);
    const std::vector<uint16_t> c0 = c16;
    be.gemm(false, false, m, cols, k, 1.0f, a16.data(), b16.data(), 1.0f, c16.data());
    for (int r = 0; r < m; ++r) {
      for (int j = 0; j < cols; ++j) {
        double want = value(c0, static_cast<size_t>(r * cols + j));
        for (int i = 0; i < k; ++i) {
          want += static_cast<double>(value(a16, static_cast<size_t>(r * k + i))) *
                  value(b16, static_cast<size_t>(i * cols + j));
        }
        EXPECT_NEAR(value(c16, static_cast<size_t>(r * cols + j)), want,
                    1e-2 * std::max(1.0, std::fabs(want)));
      }
    }
  }
}

TEST(MixedPrecision, DropoutScalesByTheMaskAsStored) {
  CpuBackend be(1, CpuBackend::kDefaultConvChunkBytes, false, DType::kBF16);
  const size_t n = 4000;
  const float p = 0.3f;  // 1 / 0.7 is not a bfloat16
  const std::vector<float> xf = random_vector(n, 9);
  const std::vector<uint16_t> x = to16(DType::kBF16, xf);
  std::vector<uint16_t> y(n), mask(n);
  be.dropout_forward(x.data(), y.data(), mask.data(), n, p, 77);
  const float keep = round_to(DType::kBF16, 1.0f / (1.0f - p));
  ASSERT_NE(keep, 1.0f / (1.0f - p));
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const float mi = bf16_to_float(mask[i]), xi = bf16_to_float(x[i]);
    ASSERT_TRUE(mi == 0.0f || mi == keep) << mi;
    kept += mi != 0.0f;
    EXPECT_EQ(bf16_to_float(y[i]), round_to(DType::kBF16, xi * mi)) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.03);
}

TEST(LossScaler, ScalesUnscalesSkipsBacksOffAndGrows) {
  CpuBackend be(1);
  LossScaler::Options o;
  o.initial_scale = 8.0f;
  o.interval = 3;
  LossScaler scaler(be, o);
  EXPECT_EQ(*scaler.scale(), 8.0f);

  // The loss gradient carries the scale.
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.0f, 1.0f, 3.0f};
  const std::vector<int32_t> labels = {2, 0};
  std::vector<float> plain(6), scaled(6);
  LossStats s;
  be.softmax_xent(logits.data(), labels.data(), 2, 3, 0.5f, nullptr, plain.data(), &s);
  be.softmax_xent(logits.data(), labels.data(), 2, 3, 0.5f, scaler.scale(), scaled.data(), &s);
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(scaled[i], 8.0f * plain[i]);

  // Finite gradients: divided by the scale, the step taken.
  OptimizerConfig oc;
  oc.momentum = 0.9;
  Sgd sgd(be, oc, 3, {{0, 3}});
  std::vector<float> params = {1, 1, 1}, grads = {8, 16, -24};
  scaler.unscale(grads.data(), grads.size());
  EXPECT_EQ(grads, (std::vector<float>{1, 2, -3}));
  EXPECT_EQ(*scaler.skip(), 0.0f);
  sgd.step(params.data(), grads.data(), 0.5, scaler.skip());
  EXPECT_EQ(params, (std::vector<float>{0.5f, 0.0f, 2.5f}));
  scaler.update();
  scaler.update();
  EXPECT_EQ(*scaler.scale(), 8.0f);
  scaler.update();  // the third good step in a row: growth
  EXPECT_EQ(*scaler.scale(), 16.0f);

  // An overflow anywhere: the step is skipped (parameters and momentum untouched), the
  // scale halves and the count of good steps restarts.
  const float* live_velocity = sgd.state().at(0).data;
  const std::vector<float> velocity(live_velocity, live_velocity + 3);
  grads = {1, std::numeric_limits<float>::infinity(), 2};
  std::vector<float> more = {std::nanf(""), 1.0f};
  scaler.unscale(grads.data(), grads.size());
  scaler.unscale(more.data(), more.size());
  EXPECT_EQ(*scaler.skip(), 1.0f);
  sgd.step(params.data(), grads.data(), 0.5, scaler.skip());
  EXPECT_EQ(params, (std::vector<float>{0.5f, 0.0f, 2.5f}));
  EXPECT_EQ(std::vector<float>(live_velocity, live_velocity + 3), velocity);
  scaler.update();
  EXPECT_EQ(*scaler.scale(), 8.0f);
  EXPECT_EQ(*scaler.skip(), 0.0f);
  scaler.update();
  scaler.update();
  EXPECT_EQ(*scaler.scale(), 8.0f);  // two good steps since the overflow
  EXPECT_EQ(scaler.take_skipped(), 1);
  EXPECT_EQ(scaler.take_skipped(), 0);

  // What a checkpoint keeps brings back the same schedule.
  const LossScaler::Saved saved = scaler.save();
  EXPECT_EQ(saved.scale, 8.0f);
  EXPECT_EQ(saved.good_steps, 2.0f);
  LossScaler other(be, o);
  other.restore(saved);
  other.update();
  EXPECT_EQ(*other.scale(), 16.0f);
}

// train.on_nonfinite: skip_step: a fixed scaler leaves the gradients as they are, skips the
// step whose gradients are not finite, and that step's loss stays out of the epoch's.
TEST(LossScaler, FixedChecksAndSkipsWithoutScaling) {
  CpuBackend be(1);
  LossScaler::Options o;
  o.fixed = true;
  LossScaler scaler(be, o);
  EXPECT_EQ(scaler.scale(), nullptr) << "softmax_xent then scales by 1";
  OptimizerConfig oc;
  oc.momentum = 0.0;
  oc.weight_decay = 0.0;
  Sgd sgd(be, oc, 2, {{0, 2}});
  std::vector<float> params = {1, 1};
  LossStats epoch, step;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> steps = {{2, 4}, {nan, 4}, {2, 4}};
  for (size_t i = 0; i < steps.size(); ++i) {
    std::vector<float> grads = steps[i];
    step = {i == 1 ? static_cast<double>(nan) : 0.5, 1.0, 2.0};
    scaler.unscale(grads.data(), grads.size());
    if (i != 1) {
      EXPECT_EQ(grads, steps[i]) << "a scale of 1 leaves gradients as they are";
    }
    EXPECT_EQ(*scaler.skip(), i == 1 ? 1.0f : 0.0f);
    sgd.step(params.data(), grads.data(), 0.25, scaler.skip());
    be.merge_loss_stats(&epoch, &step, scaler.skip());
    EXPECT_EQ(step.count, 0.0) << "the step's statistics are cleared";
    scaler.update();
  }
  EXPECT_EQ(params, (std::vector<float>{0.0f, -1.0f})) << "two updates, the NaN step skipped";
  EXPECT_EQ(epoch.loss_sum, 1.0);
  EXPECT_EQ(epoch.count, 4.0);
  EXPECT_EQ(scaler.take_skipped(), 1);
  EXPECT_EQ(scaler.current_scale(), 1.0f) << "a fixed scale never moves";
}

}  // namespace
}  // namespace hpctrain
