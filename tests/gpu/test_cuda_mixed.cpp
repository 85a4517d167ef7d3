// The CUDA backend with 16-bit activations (bfloat16, float16) against the CPU backend
// with the same activation type, operation by operation, on random inputs rounded to that
// type on the host and given to both. Operations that round one float result per element
// (conversions, element-wise arithmetic, dropout) and the loss-scale operations must agree
// bit for bit; reductions and cuBLAS / cuDNN results, whose float sums run in another order
// before their one rounding, within about one unit in the last place of the 16-bit type
// (element-wise), or 1e-2 (bfloat16) / 2e-3 (float16) of the norm for matrix products and
// convolutions. Float32 outputs computed from 16-bit inputs (sums, weight gradients,
// statistics) are compared as float32 results.
// This file: conversions, input decoding, matrix products, element-wise operations,
// dropout and the loss; test_cuda_mixed_layers.cpp: pooling, convolution, batch
// normalisation, the optimizer and loss scaling.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"
#include "common/compare.hpp"
#include "core/convert.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "core/sample_type.hpp"
#include "mixed_vs_cpu.hpp"

namespace hpctrain {
namespace {

using test::distinct_planes;
using test::expect_close;
using test::expect_same;
using test::kSums;
using test::MixedVsCpu;
using test::random_vector;
using test::relative_error;
using test::to_nhwc;
using test::type_name;

TEST_P(MixedVsCpu, ReportsItsActivationType) {
  EXPECT_EQ(gpu_->act_type(), t_);
  EXPECT_EQ(cpu_.act_type(), t_);
}

TEST(CudaMixedOptions, Tf32IsRefusedWith16BitActivations) {
  CudaBackendOptions o;
  o.act_type = DType::kBF16;
  o.tf32 = true;
  EXPECT_THROW(make_cuda_backend(o), UsageError);
}

// Rounding to nearest even, overflow to infinity and subnormals, as the host's from_float.
TEST_P(MixedVsCpu, ConvertRoundsAsTheHost) {
  std::vector<float> v = random_vector(1000, 1, 3.0);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x :
       {0.0f, -0.0f, 1e-8f, -3e-6f, 6e-5f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-11f,
        1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 3e38f, inf, -inf}) {
    v.push_back(x);
  }
  std::vector<uint16_t> want(v.size()), cpu_out(v.size());
  from_float(t_, v.data(), want.data(), v.size());
  cpu_.convert(v.data(), cpu_out.data(), v.size());
  uint16_t* out = up(std::vector<uint16_t>(v.size()));
  gpu_->convert(up(v), out, v.size());
  expect_same(widen(cpu_out), widen(want), "cpu convert");
  expect_same(down_act(out, v.size()), widen(want), "convert");
}

// Stored input decoded on the device into activations: the CPU backend's bit for bit, for
// every uint8, every finite float16 and random float32 values.
TEST_P(MixedVsCpu, DecodeInputMatchesTheCpu) {
  std::vector<uint8_t> bytes(256 * 3 + 1);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00u) != 0x7c00u) halves.push_back(static_cast<uint16_t>(h));
  }
  std::vector<float> floats = random_vector(1001, 3, 100.0);
  floats.push_back(1e-40f);
  floats.push_back(-1e5f);
  struct Case {
    SampleType type;
    const void* data;
    size_t n;
  };
  for (const Case& c : {Case{SampleType::kU8, bytes.data(), bytes.size()},
                        Case{SampleType::kF16, halves.data(), halves.size()},
                        Case{SampleType::kF32, floats.data(), floats.size()}}) {
    std::vector<uint16_t> want(c.n);
    cpu_.decode_input(c.data, c.type, c.n, {}, want.data());
    const size_t raw_bytes = c.n * sample_type_size(c.type);
    DeviceArray<std::byte> raw(*gpu_, raw_bytes);
    gpu_->copy_to_device(raw.data(), c.data, raw_bytes);
    uint16_t* out = up(std::vector<uint16_t>(c.n));
    gpu_->decode_input(raw.data(), c.type, c.n, {}, out);
    expect_same(down_act(out, c.n), widen(want), to_string(c.type));
  }
}

TEST_P(MixedVsCpu, GemmAllTransposes) {
  const double tol = act_tol();  // of the norm
  struct Size {
    int m, n, k;
  };
  for (const Size& z : {Size{37, 29, 53}, Size{128, 96, 256}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const auto a = act(random_vector(size_t(z.m) * z.k, 1 + t));
      const auto b = act(random_vector(size_t(z.k) * z.n, 5 + t));
      const auto c = act(random_vector(size_t(z.m) * z.n, 9));
      const std::string what = "gemm " + std::to_string(z.m) + " t" + std::to_string(t);
      std::vector<uint16_t> want = c;
      cpu_.gemm(ta, tb, z.m, z.n, z.k, 0.7f, a.data(), b.data(), 0.3f, want.data());
      const uint16_t *ga = up(a), *gb = up(b);
      uint16_t* gc = up(c);
      gpu_->gemm(ta, tb, z.m, z.n, z.k, 0.7f, ga, gb, 0.3f, gc);
      EXPECT_LT(relative_error(down_act(gc, c.size()), widen(want)), tol) << what;

      // Float32 C: products of 16-bit values are exact in float, so only the order of the
      // float sums differs.
      const auto c32 = random_vector(size_t(z.m) * z.n, 10);
      std::vector<float> want32 = c32;
      cpu_.gemm_f32_out(ta, tb, z.m, z.n, z.k, 0.7f, a.data(), b.data(), 0.3f, want32.data());
      float* gc32 = up(c32);
      gpu_->gemm_f32_out(ta, tb, z.m, z.n, z.k, 0.7f, ga, gb, 0.3f, gc32);
      EXPECT_LT(relative_error(down(gc32, c32.size()), want32), kSums) << what << " f32 out";
    }
  }
}

TEST_P(MixedVsCpu, BiasAndElementwise) {
  const int rows = 13, cols = 37, n = 3, c = 5, hw = 7 * 9;
  const auto y = act(random_vector(size_t(rows) * cols, 1));
  const auto bias = random_vector(cols, 2);
  std::vector<uint16_t> want = y;
  cpu_.add_bias(want.data(), bias.data(), rows, cols);
  uint16_t* dy = up(y);
  gpu_->add_bias(dy, up(bias), rows, cols);
  expect_same(down_act(dy, y.size()), widen(want), "add_bias");

  std::vector<float> sums(cols);
  cpu_.sum_rows(y.data(), sums.data(), rows, cols);
  float* ds = up(std::vector<float>(cols));
  gpu_->sum_rows(up(y), ds, rows, cols);
  expect_close(down(ds, cols), sums, kSums, "sum_rows");

  const auto img = act(random_vector(size_t(n) * c * hw, 3));
  const auto cb = random_vector(c, 4);
  want = img;
  cpu_.add_channel_bias(want.data(), cb.data(), n, c, hw);
  uint16_t* dimg = up(img);
  gpu_->add_channel_bias(dimg, up(cb), n, c, hw);
  expect_same(down_act(dimg, img.size()), widen(want), "add_channel_bias");
  std::vector<float> csum(c);
  cpu_.sum_channels(img.data(), csum.data(), n, c, hw);
  float* dcs = up(std::vector<float>(c));
  gpu_->sum_channels(up(img), dcs, n, c, hw);
  expect_close(down(dcs, c), csum, kSums, "sum_channels");

  // 1001 values: one at a time; 1024: in 16-byte packs.
  for (const size_t m : {size_t{1001}, size_t{1024}}) {
    SCOPED_TRACE(m);
    const auto a = act(random_vector(m, 5)), b = act(random_vector(m, 6));
    std::vector<uint16_t> out(m);
    uint16_t *ga = up(a), *gb = up(b), *gout = up(out);
    cpu_.add(a.data(), b.data(), out.data(), m);
    gpu_->add(ga, gb, gout, m);
    expect_same(down_act(gout, m), widen(out), "add");
    cpu_.multiply(a.data(), b.data(), out.data(), m);
    gpu_->multiply(ga, gb, gout, m);
    expect_same(down_act(gout, m), widen(out), "multiply");
    // In place, as a residual connection adds into its input.
    std::vector<uint16_t> sum = a;
    cpu_.add(sum.data(), b.data(), sum.data(), m);
    uint16_t* gsum = up(a);
    gpu_->add(gsum, gb, gsum, m);
    expect_same(down_act(gsum, m), widen(sum), "add in place");

    cpu_.relu_forward(a.data(), out.data(), m);
    gpu_->relu_forward(ga, gout, m);
    expect_same(down_act(gout, m), widen(out), "relu_forward");
    const std::vector<uint16_t> relu_y = out;
    cpu_.relu_backward(relu_y.data(), b.data(), out.data(), m);
    gpu_->relu_backward(up(relu_y), gb, gout, m);
    expect_same(down_act(gout, m), widen(out), "relu_backward");
  }
}

// The mask is stored in the activation type (1 / (1 - p) rounded) and y = x * mask as
// stored, on both backends.
TEST_P(MixedVsCpu, DropoutMatchesBitForBit) {
  const auto x = act(random_vector(4097, 5));
  for (float p : {0.3f, 0.5f}) {
    std::vector<uint16_t> y(x.size()), mask(x.size());
    cpu_.dropout_forward(x.data(), y.data(), mask.data(), x.size(), p, 77);
    uint16_t *gy = up(y), *gmask = up(mask);
    gpu_->dropout_forward(up(x), gy, gmask, x.size(), p, 77);
    expect_same(down_act(gmask, x.size()), widen(mask), "dropout mask");
    expect_same(down_act(gy, x.size()), widen(y), "dropout y");
  }
}

TEST_P(MixedVsCpu, SoftmaxCrossEntropyWithAndWithoutLossScale) {
  const int rows = 67, cols = 45;
  const auto logits = act(random_vector(size_t(rows) * cols, 1, 3.0));
  std::vector<int32_t> labels(rows);
  for (int r = 0; r < rows; ++r) labels[r] = (r * 7) % cols;
  const uint16_t* glogits = up(logits);
  const int32_t* glabels = up(labels);
  const std::vector<float> scale_host{1024.0f};
  const float* gscale = up(scale_host);
  for (const float* loss_scale : {static_cast<const float*>(nullptr), scale_host.data()}) {
    const std::string what = loss_scale == nullptr ? "" : " (loss scale)";
    std::vector<uint16_t> d(logits.size());
    LossStats want;
    cpu_.softmax_xent(logits.data(), labels.data(), rows, cols, 0.5f, loss_scale, d.data(), &want);
    DeviceArray<LossStats> stats(*gpu_, 1);
    uint16_t* gd = up(d);
    gpu_->softmax_xent(glogits, glabels, rows, cols, 0.5f, loss_scale == nullptr ? nullptr : gscale,
                       gd, stats.data());
    LossStats got;
    gpu_->copy_to_host(&got, stats.data(), sizeof(got));
    EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-9 * std::fabs(want.loss_sum)) << what;
    EXPECT_EQ(got.correct, want.correct) << what;
    EXPECT_EQ(got.count, want.count) << what;
    expect_close(down_act(gd, d.size()), widen(d), act_tol(), "dlogits" + what);
  }
  // Statistics only (evaluation).
  LossStats want;
  cpu_.softmax_xent(logits.data(), labels.data(), rows, cols, 1.0f, nullptr, nullptr, &want);
  DeviceArray<LossStats> stats(*gpu_, 1);
  gpu_->softmax_xent(glogits, glabels, rows, cols, 1.0f, nullptr, nullptr, stats.data());
  LossStats got;
  gpu_->copy_to_host(&got, stats.data(), sizeof(got));
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-9 * std::fabs(want.loss_sum));
  EXPECT_EQ(got.correct, want.correct);
}

INSTANTIATE_TEST_SUITE_P(Act, MixedVsCpu, ::testing::Values(DType::kBF16, DType::kF16), type_name);

}  // namespace
}  // namespace hpctrain
