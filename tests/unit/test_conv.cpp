// Convolution on the CPU backend: kernels against direct-loop references (every im2col
// chunking path), numerical gradient checks with batch > 1 and odd, non-square sizes,
// layer shapes and errors, and whole conv models (presets cnn and layers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "core/error.hpp"
#include "gradient_check.hpp"
#include "nn/conv2d.hpp"
#include "nn/flatten.hpp"
#include "nn/global_avgpool.hpp"
#include "nn/model.hpp"
#include "nn/pool2d.hpp"
#include "nn/presets.hpp"

namespace hpctrain {
namespace {

using gradcheck::check_layer_gradients;
using gradcheck::check_model_gradients;
using gradcheck::expect_close;
using gradcheck::GradCheckOptions;
using gradcheck::random_vector;

// ---- Direct-loop references (double accumulation) ----

// x at (i, c, iy, ix) or 0 in the padding.
double at(const std::vector<float>& x, int c_total, int h, int w, int i, int c, int iy, int ix) {
  if (iy < 0 || iy >= h || ix < 0 || ix >= w) return 0.0;
  return x[((static_cast<size_t>(i) * c_total + c) * h + iy) * w + ix];
}

std::vector<float> conv_ref(const Conv2dShape& s, const std::vector<float>& x,
                            const std::vector<float>& w) {
  const int oh = s.out_h(), ow = s.out_w();
  std::vector<float> y(static_cast<size_t>(s.n) * s.c_out * oh * ow);
  size_t o = 0;
  for (int i = 0; i < s.n; ++i) {
    for (int co = 0; co < s.c_out; ++co) {
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          double sum = 0.0;
          for (int c = 0; c < s.c_in; ++c) {
            for (int ki = 0; ki < s.kh; ++ki) {
              for (int kj = 0; kj < s.kw; ++kj) {
                const double wv =
                    w[((static_cast<size_t>(co) * s.c_in + c) * s.kh + ki) * s.kw + kj];
                sum += wv * at(x, s.c_in, s.h, s.w, i, c, oy * s.stride_h - s.pad_h + ki,
                               ox * s.stride_w - s.pad_w + kj);
              }
            }
          }
          y[o++] = static_cast<float>(sum);
        }
      }
    }
  }
  return y;
}

// dx and dw of L = sum(y * dy), by scattering each output's gradient.
void conv_backward_ref(const Conv2dShape& s, const std::vector<float>& x,
                       const std::vector<float>& w, const std::vector<float>& dy,
                       std::vector<double>& dx, std::vector<double>& dw) {
  dx.assign(x.size(), 0.0);
  dw.assign(w.size(), 0.0);
  const int oh = s.out_h(), ow = s.out_w();
  for (int i = 0; i < s.n; ++i) {
    for (int co = 0; co < s.c_out; ++co) {
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          const double g = dy[((static_cast<size_t>(i) * s.c_out + co) * oh + oy) * ow + ox];
          for (int c = 0; c < s.c_in; ++c) {
            for (int ki = 0; ki < s.kh; ++ki) {
              for (int kj = 0; kj < s.kw; ++kj) {
                const int iy = oy * s.stride_h - s.pad_h + ki, ix = ox * s.stride_w - s.pad_w + kj;
                const size_t wi = ((static_cast<size_t>(co) * s.c_in + c) * s.kh + ki) * s.kw + kj;
                dw[wi] += g * at(x, s.c_in, s.h, s.w, i, c, iy, ix);
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                dx[((static_cast<size_t>(i) * s.c_in + c) * s.h + iy) * s.w + ix] += g * w[wi];
              }
            }
          }
        }
      }
    }
  }
}

Conv2dShape conv_shape(int n, int c_in, int h, int w, int c_out, int kh, int kw, int sh, int sw,
                       int ph, int pw) {
  return Conv2dShape{n, c_in, h, w, c_out, kh, kw, sh, sw, ph, pw};
}

TEST(ConvShape, OutputSizeFollowsFloorRule) {
  EXPECT_EQ(conv_out_size(7, 3, 2, 1), 4);
  EXPECT_EQ(conv_out_size(5, 3, 2, 1), 3);
  EXPECT_EQ(conv_out_size(8, 2, 3, 0), 3);
  EXPECT_EQ(conv_out_size(2, 3, 1, 0), 0);  // smaller than the kernel
  const Conv2dShape s = conv_shape(3, 2, 7, 5, 4, 3, 3, 2, 2, 1, 1);
  EXPECT_EQ(s.out_h(), 4);
  EXPECT_EQ(s.out_w(), 3);
  EXPECT_EQ(s.patch(), 18);
}

// Forward, backward-data and backward-filter against the references, with the workspace
// sized exactly by conv2d_workspace_bytes and guarded against overruns, outputs pre-filled
// with NaN (they must be overwritten), for one-sample, partial and whole-batch chunks.
void check_conv_against_reference(const Conv2dShape& s) {
  const size_t x_n = static_cast<size_t>(s.n) * s.c_in * s.h * s.w;
  const size_t w_n = static_cast<size_t>(s.c_out) * s.patch();
  const size_t y_n = static_cast<size_t>(s.n) * s.c_out * s.out_h() * s.out_w();
  const std::vector<float> x = random_vector(x_n, 41), w = random_vector(w_n, 42);
  const std::vector<float> dy = random_vector(y_n, 43);
  const std::vector<float> y_ref = conv_ref(s, x, w);
  std::vector<double> dx_ref, dw_ref;
  conv_backward_ref(s, x, w, dy, dx_ref, dw_ref);

  const size_t per_sample = (static_cast<size_t>(s.patch()) + s.c_out) * s.out_h() * s.out_w() * 4;
  for (size_t chunk_bytes : {size_t{1}, 2 * per_sample, size_t{1} << 30}) {
    SCOPED_TRACE("chunk_bytes " + std::to_string(chunk_bytes));
    CpuBackend be(1, chunk_bytes);
    const size_t ws_bytes = be.conv2d_workspace_bytes(s);
    Conv2dShape one = s;
    one.n = 1;
    EXPECT_LE(be.conv2d_workspace_bytes(one), ws_bytes);  // sized once for the largest batch
    constexpr size_t kGuard = 64;
    constexpr float kSentinel = 12345.0f;
    std::vector<float> ws(ws_bytes / sizeof(float) + kGuard, kSentinel);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(y_n, nan), dx(x_n, nan), dw(w_n, nan);
    be.conv2d_forward(s, x.data(), w.data(), y.data(), ws.data());
    expect_close(y, y_ref, 1e-4, "y");
    be.conv2d_backward_data(s, dy.data(), w.data(), dx.data(), ws.data(), false);
    expect_close(dx, dx_ref, 1e-4, "dx");
    // Accumulating adds the same gradient to what dx holds.
    std::vector<float> acc = random_vector(x_n, 44);
    std::vector<double> acc_ref(x_n);
    for (size_t i = 0; i < x_n; ++i) acc_ref[i] = acc[i] + dx_ref[i];
    be.conv2d_backward_data(s, dy.data(), w.data(), acc.data(), ws.data(), true);
    expect_close(acc, acc_ref, 1e-4, "dx accumulated");
    be.conv2d_backward_filter(s, x.data(), dy.data(), dw.data(), ws.data());
    expect_close(dw, dw_ref, 1e-4, "dw");
    for (size_t i = ws_bytes / sizeof(float); i < ws.size(); ++i) {
      ASSERT_EQ(ws[i], kSentinel) << "workspace overrun at float " << i;
    }
  }
}

TEST(CpuConv, Stride2Pad1OddNonSquareMatchesReference) {
  check_conv_against_reference(conv_shape(3, 2, 7, 5, 4, 3, 3, 2, 2, 1, 1));
}

TEST(CpuConv, StrideLargerThanKernelSkipsInputsAndMatchesReference) {
  check_conv_against_reference(conv_shape(3, 3, 8, 7, 2, 2, 2, 3, 3, 0, 0));
}

TEST(CpuConv, RectangularKernelStrideAndPaddingMatchReference) {
  check_conv_against_reference(conv_shape(3, 2, 6, 9, 3, 3, 2, 1, 2, 0, 1));
}

TEST(CpuConv, PointwiseAndWidePaddingMatchReference) {
  check_conv_against_reference(conv_shape(4, 5, 4, 3, 6, 1, 1, 1, 1, 0, 0));
  check_conv_against_reference(conv_shape(2, 1, 3, 4, 2, 3, 3, 1, 1, 3, 2));  // pad >= kernel
}

TEST(CpuBackendOps, ChannelBiasSumsAndAdd) {
  CpuBackend be(1);
  const int n = 3, c = 2, hw = 5;
  std::vector<float> y(n * c * hw, 1.0f);
  const std::vector<float> bias = {0.5f, -2.0f};
  be.add_channel_bias(y.data(), bias.data(), n, c, hw);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[hw], -1.0f);              // sample 0, channel 1
  EXPECT_EQ(y[2 * c * hw - 1], -1.0f);  // sample 1, channel 1, last position
  std::vector<float> sums(c, 99.0f);
  be.sum_channels(y.data(), sums.data(), n, c, hw);
  EXPECT_FLOAT_EQ(sums[0], 1.5f * n * hw);
  EXPECT_FLOAT_EQ(sums[1], -1.0f * n * hw);
  const std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  std::vector<float> out(3);
  be.add(a.data(), b.data(), out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33}));
  be.add(out.data(), a.data(), out.data(), 3);  // in place
  EXPECT_EQ(out, (std::vector<float>{12, 24, 36}));
}

// ---- Layer gradient checks: batch 3, 2 channels, 7x5 ----

TEST(GradientCheck, Conv2dStride2Pad1OddNonSquare) {
  for (size_t chunk : {size_t{1}, CpuBackend::kDefaultConvChunkBytes}) {
    SCOPED_TRACE("chunk_bytes " + std::to_string(chunk));
    Conv2d layer("c", Conv2d::Options{4, 3, 2, 1, true});
    GradCheckOptions opt;
    opt.max_checks = 1000;  // every weight, bias and input element
    opt.conv_chunk_bytes = chunk;
    check_layer_gradients(layer, {2, 7, 5}, 3, opt);
  }
}

TEST(GradientCheck, Conv2dWithoutBiasStride1) {
  Conv2d layer("c", Conv2d::Options{3, 2, 1, 0, false});
  EXPECT_EQ(layer.output_dims({2, 7, 5}), (Dims{3, 6, 4}));
  EXPECT_EQ(layer.param_count(), size_t{3 * 2 * 2 * 2});
  GradCheckOptions opt;
  opt.max_checks = 1000;
  check_layer_gradients(layer, {2, 7, 5}, 3, opt);
}

// ---- Layer shapes, counts and errors ----

TEST(Conv2dLayer, ShapesCountsAndAttributes) {
  Conv2d c("conv", Conv2d::Options{32, 3, 1, 1, true});
  EXPECT_EQ(c.output_dims({1, 28, 28}), (Dims{32, 28, 28}));
  EXPECT_EQ(c.param_count(), size_t{32 * 9 + 32});
  EXPECT_EQ(c.forward_macs(), int64_t{32} * 9 * 28 * 28);
  EXPECT_EQ(c.attributes(), "k=3x3 s=1x1 p=1x1 bias");
  Conv2d strided("conv", Conv2d::Options{4, 3, 2, 1, false});
  EXPECT_EQ(strided.output_dims({2, 7, 5}), (Dims{4, 4, 3}));
  EXPECT_EQ(strided.param_count(), size_t{4 * 18});
  EXPECT_EQ(strided.attributes(), "k=3x3 s=2x2 p=1x1 nobias");
  Pool2d m("pool", Pool2d::Kind::kMax, 2, 2);
  EXPECT_EQ(m.output_dims({32, 7, 5}), (Dims{32, 3, 2}));
  EXPECT_EQ(m.param_count(), 0u);
  EXPECT_EQ(m.attributes(), "k=2x2 s=2x2 p=0x0");
  Flatten f("flat");
  EXPECT_EQ(f.output_dims({4, 3, 2}), Dims{24});
  EXPECT_TRUE(f.is_view());
}

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UsageError";
  return "";
}

TEST(Conv2dLayer, ALayerThatDoesNotFitItsInputNamesTheConfig) {
  ModelConfig mc;
  mc.preset = "layers";
  mc.layers = {{.type = "conv2d",
                .name = "big",
                .values = {{"filters", int64_t{4}}, {"kernel", int64_t{40}}}}};
  EXPECT_EQ(usage_error([&] {
              build_layers(mc, ModelData{10}, {1, 28, 28}, "c.yaml");
            }),
            "c.yaml: model: layer big: input 28x28 with padding 0 is smaller than the 40x40 "
            "kernel");
}

TEST(Conv2dLayer, InputsThatDoNotFitAreUsageErrors) {
  Conv2d c("conv1", Conv2d::Options{8, 5, 1, 1, true});
  EXPECT_EQ(usage_error([&] {
              c.output_dims({3, 2, 9});
            }),
            "layer conv1: input 2x9 with padding 1 is smaller than the 5x5 kernel");
  EXPECT_NE(usage_error([&] { c.output_dims({784}); }).find("expects [channels, height, width]"),
            std::string::npos);
  EXPECT_NE(usage_error([] {
              Conv2d bad("c", Conv2d::Options{0, 3, 1, 0, true});
            }).find("filters >= 1"),
            std::string::npos);
  Pool2d m("pool0", Pool2d::Kind::kMax, 3, 3);
  EXPECT_EQ(usage_error([&] {
              m.output_dims({4, 2, 7});
            }),
            "layer pool0: maxpool: input 2x7 with padding 0 is smaller than the 3x3 window");
  Pool2d a("avg", Pool2d::Kind::kAvg, 2, 2, 2);
  EXPECT_NE(usage_error([&] {
              a.output_dims({4, 8, 8});
            }).find("padding <= kernel / 2"),
            std::string::npos);
  GlobalAvgPool g("gap");
  EXPECT_NE(usage_error([&] { g.output_dims({10}); }).find("expects [channels, height, width]"),
            std::string::npos);
}

TEST(Flatten, RefusesToRunOutsideAModel) {
  CpuBackend be(1);
  Flatten f("flat");
  std::vector<float> x(6), y(6);
  Tensor tx{x.data(), 1, {1, 2, 3}}, ty{y.data(), 1, {6}};
  EXPECT_THROW(f.forward(be, tx, ty, true), Error);
}

// ---- Whole models ----

TEST(Model, CnnPresetShapesAndArchitecture) {
  CpuBackend be(1);
  ModelConfig mc;
  mc.preset = "cnn";
  Model m(be, build_layers(mc, 10, {1, 28, 28}), {1, 28, 28}, 4);
  EXPECT_EQ(m.param_count(), size_t{320 + 18496 + (3136 * 128 + 128) + 1290});
  EXPECT_EQ(m.output_dims(), Dims{10});
  const std::string arch = m.architecture();
  EXPECT_NE(arch.find("layer conv0 conv2d params=320 out=32x28x28 k=3x3 s=1x1 p=1x1 bias\n"),
            std::string::npos)
      << arch;
  EXPECT_NE(arch.find("layer pool1 maxpool params=0 out=64x7x7 k=2x2 s=2x2 p=0x0\n"),
            std::string::npos)
      << arch;
  EXPECT_NE(arch.find("layer flatten flatten params=0 out=3136\n"), std::string::npos) << arch;
  EXPECT_NE(arch.find("layer classifier dense params=1290 out=10\n"), std::string::npos) << arch;
  // Too small for two 2x2 poolings.
  EXPECT_THROW(Model(be, build_layers(mc, 10, {1, 3, 3}), {1, 3, 3}, 4), UsageError);
}

TEST(Model, CnnBackwardMatchesNumericalOnTinyOddInput) {
  CpuBackend be(1, 1 << 12);  // small chunks: several im2col chunks per batch
  ModelConfig mc;
  mc.preset = "cnn";
  const int classes = 4;
  // 2x9x7 -> 32x9x7 -> 32x4x3 -> 64x4x3 -> 64x2x1 -> 128; batch 3 below max_batch 5.
  Model m(be, build_layers(mc, classes, {2, 9, 7}), {2, 9, 7}, 5);
  m.init_params(17);
  std::vector<float> x = random_vector(3 * 2 * 9 * 7, 71);
  check_model_gradients(m, x, {1, 3, 0}, classes, 97, 5e-3);
}

LayerSpec layer_spec(const std::string& type, const std::string& name) {
  LayerSpec spec;
  spec.type = type;
  spec.name = name;
  return spec;
}

TEST(Model, LayersPresetWithFlattenFirstAndConvStack) {
  CpuBackend be(1);
  ModelConfig mc;
  mc.preset = "layers";
  const LayerSpec flatten = layer_spec("flatten", "flat");
  LayerSpec dense = layer_spec("dense", "d");
  dense.set("units", int64_t{5});
  mc.layers = {flatten, dense};
  {
    // Flatten as the first layer is a view of the model input: nothing to copy, no dx.
    Model m(be, build_layers(mc, 3, {2, 3, 2}), {2, 3, 2}, 4);
    m.init_params(3);
    std::vector<float> x = random_vector(4 * 12, 81);
    check_model_gradients(m, x, {0, 2, 1, 1}, 3, 1, 2e-3);
  }
  LayerSpec conv = layer_spec("conv2d", "c");
  conv.set("filters", int64_t{3});
  conv.set("kernel", int64_t{3});
  conv.set("stride", int64_t{2});
  conv.set("padding", int64_t{1});
  LayerSpec avg = layer_spec("avgpool", "a");
  avg.set("kernel", int64_t{2});
  avg.set("stride", int64_t{1});
  LayerSpec conv2 = conv;
  conv2.name = "c2";
  conv2.set("stride", int64_t{1});
  mc.layers = {conv, layer_spec("relu", "r"), avg, conv2, flatten, dense};
  Model m(be, build_layers(mc, 3, {2, 7, 5}), {2, 7, 5}, 3);
  EXPECT_EQ(m.layers()[4]->type(), std::string("flatten"));
  m.init_params(4);
  std::vector<float> x = random_vector(3 * 70, 82);
  check_model_gradients(m, x, {2, 0, 1}, 3, 1, 5e-3);
  mc.layers = {conv, layer_spec("global_avgpool", "g"), dense};
  Model g(be, build_layers(mc, 3, {2, 7, 5}), {2, 7, 5}, 3);
  EXPECT_EQ(g.layers()[1]->name(), "g");
  g.init_params(5);
  check_model_gradients(g, x, {2, 0, 1}, 3, 1, 5e-3);
}

}  // namespace
}  // namespace hpctrain
