// Tests of the layers ResNets need — batch normalisation, dropout, the basic block — and
// of the resnet18/resnet34 presets: references computed in double, numerical gradient
// checks at odd sizes with batch > 1, model state, and torchvision's parameter counts.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "core/error.hpp"
#include "gradient_check.hpp"
#include "nn/basic_block.hpp"
#include "nn/batchnorm.hpp"
#include "nn/dense.hpp"
#include "nn/dropout.hpp"
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

// A layer bound to host vectors, as the model would bind it.
struct Bound {
  std::vector<float> params, grads, state;
  Bound(Layer& layer, Backend& be, const Dims& in, int64_t max_batch) {
    layer.output_dims(in);
    params.resize(layer.param_count());
    grads.resize(layer.param_count());
    state.resize(layer.state_count());
    layer.bind(ParamSlice::f32(params.data(), grads.data()));
    layer.bind_state(state.data());
    Rng rng(1);
    layer.init_params(rng, params.data());
    layer.init_state(state.data());
    layer.allocate(be, max_batch);
  }
};

// ---- BatchNorm ----

TEST(BatchNorm, TrainingNormalisesPerChannelAndUpdatesRunningStatistics) {
  CpuBackend be(1);
  BatchNorm bn("bn", 1e-5f, 0.25f);
  const int n = 3, c = 2, h = 5, w = 7, hw = h * w;
  Bound b(bn, be, {c, h, w}, n);
  b.params = {2.0f, 0.5f, -1.0f, 3.0f};  // gamma, beta
  std::vector<float> x = random_vector(n * c * hw, 5, 3.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] += (i / hw) % 2 == 0 ? 10.0f : -4.0f;  // channel means
  std::vector<float> y(x.size());
  Tensor tx{x.data(), n, {c, h, w}}, ty{y.data(), n, {c, h, w}};
  bn.forward(be, tx, ty, true);
  for (int ch = 0; ch < c; ++ch) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) mean += x[(i * c + ch) * hw + j];
    mean /= n * hw;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) var += std::pow(x[(i * c + ch) * hw + j] - mean, 2);
    var /= n * hw;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < hw; ++j) {
        const size_t k = (i * c + ch) * hw + j;
        const double want = b.params[ch] * (x[k] - mean) / std::sqrt(var + 1e-5) + b.params[c + ch];
        ASSERT_NEAR(y[k], want, 1e-4 * std::max(1.0, std::fabs(want))) << k;
      }
    }
    // running = 0.75 * initial + 0.25 * batch, with the unbiased variance.
    EXPECT_NEAR(b.state[ch], 0.25 * mean, 1e-4);
    EXPECT_NEAR(b.state[c + ch], 0.75 + 0.25 * var * (n * hw) / (n * hw - 1), 1e-3);
  }
  // Evaluation uses the running statistics.
  bn.forward(be, tx, ty, false);
  for (int ch = 0; ch < c; ++ch) {
    const size_t k = ch * hw + 3;
    const double want =
        b.params[ch] * (x[k] - b.state[ch]) / std::sqrt(b.state[c + ch] + 1e-5) + b.params[c + ch];
    EXPECT_NEAR(y[k], want, 1e-4 * std::max(1.0, std::fabs(want)));
  }
}

TEST(BatchNorm, GradientsOnImagesAndFeatures) {
  BatchNorm conv_bn("bn");
  check_layer_gradients(conv_bn, {3, 5, 7}, 4, {.tol = 2e-3, .eps = 1e-2f});
  BatchNorm dense_bn("bn1d");
  check_layer_gradients(dense_bn, {6}, 5, {.tol = 2e-3, .eps = 1e-2f});
}

// A training batch that gives each channel one value ([f] at batch 1, or 1x1 planes) has
// variance 0: the layer keeps its running statistics (they would decay toward a variance of
// 0, just before an evaluation where a partial last batch of 1 comes last), fused with a
// ReLU too, and a model names the layer so that a run of such batches can be refused.
TEST(BatchNorm, OneValuePerChannelKeepsTheRunningStatistics) {
  CpuBackend be(1);
  for (bool fused : {false, true}) {
    for (const Dims& in : {Dims{4}, Dims{4, 1, 1}}) {
      BatchNorm bn("bn");
      if (fused) bn.fuse_relu();
      Bound b(bn, be, in, 3);
      b.state = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f, 0.25f, 1.5f, 2.0f};  // running mean, variance
      const std::vector<float> before = b.state;
      EXPECT_TRUE(bn.one_value_per_channel(1));
      EXPECT_FALSE(bn.one_value_per_channel(2));
      std::vector<float> x = random_vector(12, 3), y(12);
      Tensor t1{x.data(), 1, in}, y1{y.data(), 1, in};
      bn.forward(be, t1, y1, true);
      EXPECT_EQ(b.state, before) << "batch 1 changed the running statistics";
      Tensor t3{x.data(), 3, in}, y3{y.data(), 3, in};
      bn.forward(be, t3, y3, true);
      EXPECT_NE(b.state, before) << "batch 3 left the running statistics";
    }
  }
  BatchNorm planes("bn");
  planes.output_dims({4, 2, 1});
  EXPECT_FALSE(planes.one_value_per_channel(1));

  std::vector<std::unique_ptr<Layer>> dense_bn;
  dense_bn.push_back(std::make_unique<Dense>("d", 4));
  dense_bn.push_back(std::make_unique<BatchNorm>("bn"));
  EXPECT_EQ(Model(be, std::move(dense_bn), {6}, 4).batchnorm_with_one_value(1), "bn");
  std::vector<std::unique_ptr<Layer>> block;
  block.push_back(std::make_unique<BasicBlock>("block", 2, 1));
  const Model on_1x1(be, std::move(block), {2, 1, 1}, 4);
  EXPECT_EQ(on_1x1.batchnorm_with_one_value(1), "block.bn1");
  EXPECT_EQ(on_1x1.batchnorm_with_one_value(2), "");
}

TEST(BatchNorm, RefusesBadShapesAndSettings) {
  BatchNorm bn("bn");
  EXPECT_THROW(bn.output_dims({2, 3}), UsageError);
  EXPECT_THROW(BatchNorm("b", 0.0f), UsageError);
  EXPECT_THROW(BatchNorm("b", 1e-5f, 1.5f), UsageError);
}

// A BatchNorm followed by a ReLU runs fused (the ReLU becomes a view); a zero-rate
// dropout between them keeps them apart. Both models compute the same bits.
TEST(BatchNorm, FollowedByReluRunsFusedWithTheSameResults) {
  CpuBackend be(1);
  const Dims in = {3, 4, 5};
  const int batch = 6, classes = 4;
  auto build = [&](bool apart) {
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<BatchNorm>("bn"));
    if (apart) layers.push_back(std::make_unique<Dropout>("keep", 0.0f));
    layers.push_back(std::make_unique<Relu>("relu"));
    layers.push_back(std::make_unique<Dense>("out", classes));
    return std::make_unique<Model>(be, std::move(layers), in, batch);
  };
  const auto fused = build(false), apart = build(true);
  EXPECT_TRUE(fused->layers()[1]->is_view());
  EXPECT_FALSE(apart->layers()[2]->is_view());
  fused->init_params(4);
  std::vector<float> params(fused->param_count());
  std::vector<float> state(fused->state_count());
  fused->get_params(params.data());
  fused->get_state(state.data());
  apart->set_params(params.data());
  apart->set_state(state.data());
  const std::vector<float> x = random_vector(static_cast<size_t>(batch) * 60, 8);
  const std::vector<int32_t> labels = {0, 3, 1, 2, 2, 0};
  std::vector<std::vector<float>> outs;
  for (Model* m : {fused.get(), apart.get()}) {
    const Tensor& logits = m->forward(x.data(), batch, true, 1);
    LossStats stats;
    be.softmax_xent(logits.data, labels.data(), batch, classes, 1.0f / batch, nullptr, m->dlogits(),
                    &stats);
    m->backward();
    const float* y = static_cast<const float*>(m->forward(x.data(), batch, false).data);
    std::vector<float> out(y, y + batch * classes);
    out.insert(out.end(), m->grads(), m->grads() + m->param_count());
    m->get_state(state.data());
    out.insert(out.end(), state.begin(), state.end());
    outs.push_back(out);
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t i = 0; i < outs[0].size(); ++i) EXPECT_EQ(outs[0][i], outs[1][i]) << i;
}

// ---- Dropout ----

TEST(Dropout, MaskIsSeededScaledAndPassesThroughInEvaluation) {
  CpuBackend be(1);
  const float p = 0.3f;
  Dropout d("drop", p);
  const int64_t n = 4, f = 2500;
  Bound b(d, be, {f}, n);
  std::vector<float> x(n * f, 1.0f), y(x.size()), y2(x.size());
  Tensor tx{x.data(), n, {f}}, ty{y.data(), n, {f}}, ty2{y2.data(), n, {f}};
  d.set_rng_seed(42);
  d.forward(be, tx, ty, true);
  size_t zeros = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.0f || std::fabs(v - 1.0f / (1.0f - p)) < 1e-6f) << v;
    zeros += v == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(zeros) / y.size(), p, 0.02);
  d.forward(be, tx, ty2, true);
  EXPECT_EQ(y, y2);  // same seed, same mask
  d.set_rng_seed(43);
  d.forward(be, tx, ty2, true);
  EXPECT_NE(y, y2);
  d.forward(be, tx, ty2, false);
  EXPECT_EQ(y2, x);
  EXPECT_THROW(Dropout("d", 1.0f), UsageError);
}

TEST(Dropout, GradientUsesTheForwardMask) {
  Dropout d("drop", 0.4f);
  d.set_rng_seed(7);
  check_layer_gradients(d, {3, 4, 5}, 3);
}

// ---- BasicBlock ----

TEST(BasicBlock, IdentityAndProjectionShortcuts) {
  BasicBlock same("b", 4, 1);
  EXPECT_EQ(same.output_dims({4, 7, 5}), (Dims{4, 7, 5}));
  EXPECT_EQ(same.sublayers().size(), 4u);
  EXPECT_EQ(same.param_count(), size_t{2 * (4 * 4 * 9) + 2 * 8});
  EXPECT_EQ(same.state_count(), size_t{2 * 8});
  BasicBlock down("d", 6, 2);
  EXPECT_EQ(down.output_dims({3, 7, 5}), (Dims{6, 4, 3}));
  ASSERT_EQ(down.sublayers().size(), 6u);
  EXPECT_EQ(down.param_count(), size_t{6 * 3 * 9 + 12 + 6 * 6 * 9 + 12 + 6 * 3 + 12});
  EXPECT_NE(down.attributes().find("projection"), std::string::npos);
  EXPECT_THROW(BasicBlock("x", 0, 1), UsageError);
  EXPECT_THROW(BasicBlock("x", 4, 1).output_dims({4}), UsageError);
}

TEST(BasicBlock, GradientsWithIdentityShortcut) {
  BasicBlock block("b", 3, 1);
  check_layer_gradients(block, {3, 7, 5}, 3, {.tol = 5e-3, .eps = 1e-3f, .max_kink_fraction = 0.1});
}

TEST(BasicBlock, GradientsWithProjectionShortcut) {
  BasicBlock block("b", 4, 2);
  check_layer_gradients(
      block, {2, 7, 9}, 3,
      {.tol = 5e-3, .eps = 1e-3f, .conv_chunk_bytes = 1 << 10, .max_kink_fraction = 0.1});
}

// ---- Models ----

ModelConfig resnet(const char* preset, int width = 64, const char* stem = "auto") {
  ModelConfig mc;
  mc.preset = preset;
  mc.hidden.clear();
  mc.width = width;
  mc.stem = stem;
  return mc;
}

// inspect --time times every part of a block (convolutions, batch normalisations, the
// projection shortcut's) in both passes, and prints the times on the parts' rows.
TEST(ResNet, InspectTimesThePartsOfEachBlock) {
  CpuBackend be(1);
  Model m(be, build_layers(resnet("resnet18", 2, "small"), 10, {1, 12, 12}), {1, 12, 12}, 2);
  m.init_params(1);
  const LayerTimes t = time_layers(m, 2, 10, 1, 2);
  ASSERT_EQ(t.part_forward_s.size(), m.layers().size());
  ASSERT_EQ(t.part_backward_s.size(), m.layers().size());
  size_t blocks = 0;
  for (size_t i = 0; i < m.layers().size(); ++i) {
    const size_t parts = m.layers()[i]->sublayers().size();
    ASSERT_EQ(t.part_forward_s[i].size(), parts) << m.layers()[i]->name();
    ASSERT_EQ(t.part_backward_s[i].size(), parts) << m.layers()[i]->name();
    for (size_t p = 0; p < parts; ++p) {
      EXPECT_GT(t.part_forward_s[i][p], 0.0) << m.layers()[i]->name() << " part " << p;
      EXPECT_GT(t.part_backward_s[i][p], 0.0) << m.layers()[i]->name() << " part " << p;
    }
    blocks += parts > 0 ? 1 : 0;
  }
  EXPECT_EQ(blocks, size_t{8});
  const std::string table = model_summary(m, &t);
  const size_t row = table.find("  layer2.0.shortcut_conv");
  ASSERT_NE(row, std::string::npos) << table;
  std::istringstream line(table.substr(row, table.find('\n', row) - row));
  std::vector<std::string> fields{std::istream_iterator<std::string>(line), {}};
  // name, type, params, MFLOPs, then forward ms, backward ms, forward GFLOP/s.
  ASSERT_EQ(fields.size(), size_t{7}) << table;
  EXPECT_GE(std::stod(fields[4]), 0.0) << table;  // a number (ms at 3 decimals)
  EXPECT_NE(table.find("parts of a block"), std::string::npos) << table;
}

TEST(ResNet, ParameterCountsMatchTorchvision) {
  CpuBackend be(1);
  // torchvision.models.resnet18() / resnet34(): 3 input channels, 1000 classes.
  EXPECT_EQ(Model(be, build_layers(resnet("resnet18"), 1000, {3, 224, 224}), {3, 224, 224}, 1)
                .param_count(),
            size_t{11689512});
  EXPECT_EQ(Model(be, build_layers(resnet("resnet34"), 1000, {3, 224, 224}), {3, 224, 224}, 1)
                .param_count(),
            size_t{21797672});
  // The classic benchmark's ResNet-34: 1 input channel (stem 64x1x7x7 instead of 64x3x7x7:
  // -6272) and 9 classes (fc 512x9+9 instead of 512x1000+1000: -508383).
  Model m(be, build_layers(resnet("resnet34"), 9, {1, 148, 197}), {1, 148, 197}, 1);
  EXPECT_EQ(m.param_count(), size_t{21797672 - 6272 - 508383});
  // BatchNorm running mean and variance: 2 per BatchNorm channel.
  EXPECT_EQ(m.state_count(), size_t{2 * (64 + 2 * 64 * 3 + 2 * 128 * 4 + 128 + 2 * 256 * 6 + 256 +
                                         2 * 512 * 3 + 512)});
  const std::string arch = m.architecture();
  EXPECT_NE(arch.find("layer stem_pool maxpool params=0 out=64x37x50"), std::string::npos) << arch;
  EXPECT_NE(arch.find("layer layer4.2 basic_block params=4720640 state=2048 out=512x5x7 "
                      "filters=512 s=1 identity\n"),
            std::string::npos)
      << arch;
}

TEST(ResNet, SmallStemForSmallImagesAndReducedWidth) {
  CpuBackend be(1);
  Model m(be, build_layers(resnet("resnet18", 8), 10, {1, 28, 28}), {1, 28, 28}, 2);
  EXPECT_EQ(m.layers()[0]->attributes(), "k=3x3 s=1x1 p=1x1 nobias");
  EXPECT_EQ(m.layers()[2]->type(), std::string("relu"));  // no max pooling after the stem
  EXPECT_EQ(m.output_dims(), Dims{10});
  const std::string arch = m.architecture();
  EXPECT_NE(arch.find("out=64x4x4 filters=64 s=1 identity\nlayer avgpool"), std::string::npos)
      << arch;
  Model big(be, build_layers(resnet("resnet18", 8, "imagenet"), 10, {1, 28, 28}), {1, 28, 28}, 2);
  EXPECT_EQ(big.layers()[3]->type(), std::string("maxpool"));
}

TEST(ResNet, TinyResNetGradientsThroughTheLoss) {
  CpuBackend be(1, 1 << 11);
  // Width 2 keeps the check fast; 2 stages of the small stem's model reach 3x3.
  Model m(be, build_layers(resnet("resnet18", 2), 3, {2, 11, 9}), {2, 11, 9}, 4);
  m.init_params(3);
  std::vector<float> x = random_vector(4 * 2 * 11 * 9, 91);
  check_model_gradients(m, x, {0, 2, 1, 2}, 3, 13, 1e-2, 0.1);
}

TEST(ResNet, Resnet34ForwardBackwardAtTheClassicShape) {
  CpuBackend be(2);
  const int64_t batch = 4;
  Model m(be, build_layers(resnet("resnet34"), 9, {1, 148, 197}), {1, 148, 197}, batch);
  m.init_params(1);
  std::vector<float> x = random_vector(static_cast<size_t>(batch * 148 * 197), 5);
  for (float& v : x) v = std::fabs(v) * 0.3f;  // images in [0, 1)-ish
  const std::vector<int32_t> labels = {0, 8, 3, 5};
  LossStats s;
  const Tensor& logits = m.forward(x.data(), batch, true);
  ASSERT_EQ(logits.dims, Dims{9});
  be.softmax_xent(logits.data, labels.data(), batch, 9, 1.0f / batch, nullptr, m.dlogits(), &s);
  m.backward();
  EXPECT_TRUE(std::isfinite(s.loss_sum));
  EXPECT_GT(s.loss_sum / batch, 0.5);  // about ln 9 from a fresh init
  double grad_norm = 0;
  for (size_t i = 0; i < m.param_count(); ++i) {
    ASSERT_TRUE(std::isfinite(m.grads()[i])) << i;
    grad_norm += static_cast<double>(m.grads()[i]) * m.grads()[i];
  }
  EXPECT_GT(grad_norm, 0.0);
  // The stem's gradient is reached through all 16 blocks.
  double stem = 0;
  for (size_t i = 0; i < 64 * 49; ++i) stem += std::fabs(m.grads()[i]);
  EXPECT_GT(stem, 0.0);
}

TEST(ModelState, ArenaInitialisedAndArchitectureNamesIt) {
  CpuBackend be(1);
  ModelConfig mc;
  mc.preset = "layers";
  mc.hidden.clear();
  LayerSpec conv;
  conv.type = "conv2d";
  conv.name = "c";
  conv.set("filters", int64_t{3});
  conv.set("kernel", int64_t{3});
  LayerSpec bn;
  bn.type = "batchnorm";
  bn.name = "bn";
  LayerSpec drop;
  drop.type = "dropout";
  drop.name = "drop";
  drop.set("rate", 0.25);
  LayerSpec flat;
  flat.type = "flatten";
  flat.name = "f";
  mc.layers = {conv, bn, drop, flat};
  Model m(be, build_layers(mc, 2, {1, 5, 5}), {1, 5, 5}, 3);
  ASSERT_EQ(m.state_count(), 6u);
  m.init_params(1);
  std::vector<float> state(6);
  m.get_state(state.data());
  EXPECT_EQ(state, (std::vector<float>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(m.state_offset(1), 0u);
  const std::string arch = m.architecture();
  EXPECT_NE(arch.find("layer bn batchnorm params=6 state=6 out=3x3x3 eps=1e-05 momentum=0.1\n"),
            std::string::npos)
      << arch;
  EXPECT_NE(arch.find("layer drop dropout params=0 out=3x3x3 p=0.25\n"), std::string::npos) << arch;
  // A training forward moves the running statistics; an evaluation forward does not.
  std::vector<float> x = random_vector(3 * 25, 4);
  m.forward(x.data(), 3, false);
  m.get_state(state.data());
  EXPECT_EQ(state, (std::vector<float>{0, 0, 0, 1, 1, 1}));
  m.forward(x.data(), 3, true, 9);
  m.get_state(state.data());
  EXPECT_NE(state, (std::vector<float>{0, 0, 0, 1, 1, 1}));
  // Dropout draws from the seed: same seed, same logits.
  std::vector<float> a(2), b(2);
  const Tensor& l1 = m.forward(x.data(), 1, true, 9);
  a.assign(static_cast<const float*>(l1.data), static_cast<const float*>(l1.data) + 2);
  const Tensor& l2 = m.forward(x.data(), 1, true, 9);
  b.assign(static_cast<const float*>(l2.data), static_cast<const float*>(l2.data) + 2);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace hpctrain
