// The CUDA backend with 16-bit activations against the CPU backend with the same
// activation type (see test_cuda_mixed.cpp for the tolerances): pooling (also channels
// last), convolution, batch normalisation (also the fused add + ReLU, channels last), SGD
// with the skip flag, dynamic loss scaling and the embedding.
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

TEST_P(MixedVsCpu, Pooling) {
  for (const Pool2dShape s :
       {Pool2dShape{3, 4, 9, 7, 3, 3, 2, 2, 1, 1}, Pool2dShape{2, 3, 8, 10, 2, 2, 2, 2, 0, 0}}) {
    std::string what = " ";  // (" " + std::string: a false -Wrestrict in GCC 12)
    what += std::to_string(s.kh) + "x" + std::to_string(s.kw);
    const auto x = act(distinct_planes(size_t(s.n) * s.c, size_t(s.h) * s.w, 1));
    const size_t ny = size_t(s.n) * s.c * s.out_h() * s.out_w();
    const auto dy = act(random_vector(ny, 2));
    std::vector<uint16_t> y(ny), dx(x.size());
    uint16_t *gx = up(x), *gy = up(y), *gdx = up(dx), *gdy = up(dy);
    cpu_.maxpool2d_forward(s, x.data(), y.data());
    gpu_->maxpool2d_forward(s, gx, gy);
    expect_same(down_act(gy, ny), widen(y), "maxpool forward" + what);
    cpu_.maxpool2d_backward(s, x.data(), y.data(), dy.data(), dx.data());
    gpu_->maxpool2d_backward(s, gx, gy, gdy, gdx);
    // Overlapping windows add up to four gradients per cell, in either type.
    expect_close(down_act(gdx, dx.size()), widen(dx), 2 * act_tol(), "maxpool backward" + what);
    cpu_.avgpool2d_forward(s, x.data(), y.data());
    gpu_->avgpool2d_forward(s, gx, gy);
    expect_close(down_act(gy, ny), widen(y), act_tol(), "avgpool forward" + what);
    cpu_.avgpool2d_backward(s, dy.data(), dx.data());
    gpu_->avgpool2d_backward(s, gdy, gdx);
    expect_close(down_act(gdx, dx.size()), widen(dx), act_tol(), "avgpool backward" + what);
  }
}

// Channels last, max pooling runs in kernels/pool.cu: the CPU's results on the same data
// in NCHW, with many equal values (a relu's zeros, a coarse ramp), whose gradient goes to
// each window's first maximum on both backends.
TEST_P(MixedVsCpu, ChannelsLastMaxPool) {
  gpu_ = make_gpu(false, /*channels_last=*/true);
  for (const Pool2dShape s :
       {Pool2dShape{2, 16, 9, 11, 3, 3, 2, 2, 1, 1}, Pool2dShape{2, 3, 7, 6, 2, 2, 2, 2, 0, 0},
        Pool2dShape{1, 8, 5, 5, 3, 3, 1, 1, 1, 1}}) {
    const std::string what = " c=" + std::to_string(s.c) + " " + std::to_string(s.kh) + "x" +
                             std::to_string(s.kw) + "/" + std::to_string(s.stride_h);
    const int in_cells = s.h * s.w, out_cells = s.out_h() * s.out_w();
    std::vector<float> xf = random_vector(size_t(s.n) * s.c * in_cells, 7);
    for (float& v : xf) v = std::max(0.0f, std::floor(v * 4.0f) / 8.0f);
    const auto x = act(xf);
    const size_t ny = size_t(s.n) * s.c * out_cells;
    const auto dy = act(random_vector(ny, 8));
    std::vector<uint16_t> y(ny), dx(x.size());
    cpu_.maxpool2d_forward(s, x.data(), y.data());
    cpu_.maxpool2d_backward(s, x.data(), y.data(), dy.data(), dx.data());
    uint16_t *gx = up(to_nhwc(x, s.n, s.c, in_cells)), *gy = up(std::vector<uint16_t>(ny));
    uint16_t *gdy = up(to_nhwc(dy, s.n, s.c, out_cells)),
             *gdx = up(std::vector<uint16_t>(x.size()));
    gpu_->maxpool2d_forward(s, gx, gy);
    expect_same(down_act(gy, ny), widen(to_nhwc(y, s.n, s.c, out_cells)), "maxpool forward" + what);
    gpu_->maxpool2d_backward(s, gx, gy, gdy, gdx);
    expect_close(down_act(gdx, x.size()), widen(to_nhwc(dx, s.n, s.c, in_cells)), 2 * act_tol(),
                 "maxpool backward" + what);
  }
}

// Odd sizes with stride 2 and padding, and a wider layer for the tensor-core kernels; both
// with timed algorithms (cuDNN Find) and the deterministic heuristics' choice. The filter
// gradient passes through the 16-bit scratch in the workspace, so each of its values is a
// 16-bit value. A smaller batch, first seen after set-up (a last partial batch), reuses the
// workspace sized for the full one.
TEST_P(MixedVsCpu, Convolution) {
  const double tol = act_tol();  // of the norm
  for (const Conv2dShape s : {Conv2dShape{3, 5, 11, 9, 7, 3, 3, 2, 2, 1, 1},
                              Conv2dShape{4, 16, 15, 17, 32, 3, 3, 1, 1, 1, 1}}) {
    for (bool deterministic : {false, true}) {
      std::unique_ptr<Backend> g = make_gpu(deterministic);
      const std::string what =
          " c_in " + std::to_string(s.c_in) + (deterministic ? " (deterministic)" : " (timed)");
      const auto x = act(random_vector(size_t(s.n) * s.c_in * s.h * s.w, 1));
      const auto w = act(random_vector(size_t(s.c_out) * s.patch(), 2, 0.3));
      const size_t ny = size_t(s.n) * s.c_out * s.out_h() * s.out_w();
      const auto dy = act(random_vector(ny, 3));
      std::vector<uint16_t> y(ny), dx(x.size());
      std::vector<float> dw(w.size());
      std::vector<float> cpu_ws(cpu_.conv2d_workspace_bytes(s) / sizeof(float) + 1);
      DeviceArray<std::byte> ws(*g, g->conv2d_workspace_bytes(s));
      DeviceArray<uint16_t> gx(*g, x.size()), gw(*g, w.size()), gy(*g, ny), gdy(*g, ny),
          gdx(*g, x.size());
      DeviceArray<float> gdw(*g, w.size());
      g->copy_to_device(gx.data(), x.data(), x.size() * sizeof(uint16_t));
      g->copy_to_device(gw.data(), w.data(), w.size() * sizeof(uint16_t));
      g->copy_to_device(gdy.data(), dy.data(), ny * sizeof(uint16_t));
      auto fetch = [&](const void* p, size_t n) {
        std::vector<uint16_t> h(n);
        g->copy_to_host(h.data(), p, n * sizeof(uint16_t));
        return widen(h);
      };

      cpu_.conv2d_forward(s, x.data(), w.data(), y.data(), cpu_ws.data());
      g->conv2d_forward(s, gx.data(), gw.data(), gy.data(), ws.data());
      EXPECT_LT(relative_error(fetch(gy.data(), ny), widen(y)), tol) << "forward" << what;
      cpu_.conv2d_backward_data(s, dy.data(), w.data(), dx.data(), cpu_ws.data(), false);
      g->conv2d_backward_data(s, gdy.data(), gw.data(), gdx.data(), ws.data(), false);
      EXPECT_LT(relative_error(fetch(gdx.data(), x.size()), widen(dx)), tol)
          << "backward data" << what;
      cpu_.conv2d_backward_data(s, dy.data(), w.data(), dx.data(), cpu_ws.data(), true);
      g->conv2d_backward_data(s, gdy.data(), gw.data(), gdx.data(), ws.data(), true);
      EXPECT_LT(relative_error(fetch(gdx.data(), x.size()), widen(dx)), tol)
          << "backward data, accumulated" << what;
      cpu_.conv2d_backward_filter(s, x.data(), dy.data(), dw.data(), cpu_ws.data());
      g->conv2d_backward_filter(s, gx.data(), gdy.data(), gdw.data(), ws.data());
      std::vector<float> got(w.size());
      g->copy_to_host(got.data(), gdw.data(), got.size() * sizeof(float));
      EXPECT_LT(relative_error(got, dw), tol) << "backward filter" << what;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(round_to(t_, got[i]), got[i]) << "dw[" << i << "] is not a 16-bit value" << what;
      }

      Conv2dShape part = s;
      part.n = s.n - 1;
      const size_t ny_part = size_t(part.n) * s.c_out * s.out_h() * s.out_w();
      cpu_.conv2d_forward(part, x.data(), w.data(), y.data(), cpu_ws.data());
      g->conv2d_forward(part, gx.data(), gw.data(), gy.data(), ws.data());
      y.resize(ny_part);
      EXPECT_LT(relative_error(fetch(gy.data(), ny_part), widen(y)), tol)
          << "forward, smaller batch" << what;
      cpu_.conv2d_backward_filter(part, x.data(), dy.data(), dw.data(), cpu_ws.data());
      g->conv2d_backward_filter(part, gx.data(), gdy.data(), gdw.data(), ws.data());
      g->copy_to_host(got.data(), gdw.data(), got.size() * sizeof(float));
      EXPECT_LT(relative_error(got, dw), tol) << "backward filter, smaller batch" << what;
    }
  }
}

// 16-bit data, float32 scale, bias and statistics.
TEST_P(MixedVsCpu, BatchNormalisation) {
  const int n = 4, c = 6, hw = 5 * 7;
  const size_t m = size_t(n) * c * hw;
  std::vector<float> xf = random_vector(m, 1, 2.0);
  for (size_t i = 0; i < m; ++i) xf[i] += static_cast<float>((i / hw) % c) - 2.0f;
  const auto x = act(xf), dy = act(random_vector(m, 2));
  const auto gamma = random_vector(c, 3), beta = random_vector(c, 4);
  std::vector<float> rm(c, 0.1f), rv(c, 1.5f), mean(c), inv(c);
  std::vector<uint16_t> y(m);
  const uint16_t* gx = up(x);
  const uint16_t* gdy = up(dy);
  float *gg = up(gamma), *gb = up(beta), *grm = up(rm), *grv = up(rv), *gmean = up(mean),
        *ginv = up(inv);
  uint16_t* gy = up(y);
  cpu_.batchnorm_forward_training(x.data(), gamma.data(), beta.data(), y.data(), n, c, hw, 1e-5f,
                                  0.1f, rm.data(), rv.data(), mean.data(), inv.data());
  gpu_->batchnorm_forward_training(gx, gg, gb, gy, n, c, hw, 1e-5f, 0.1f, grm, grv, gmean, ginv);
  expect_close(down_act(gy, m), widen(y), act_tol(), "bn forward");
  expect_close(down(grm, c), rm, kSums, "bn running mean");
  expect_close(down(grv, c), rv, kSums, "bn running variance");
  expect_close(down(gmean, c), mean, kSums, "bn saved mean");
  expect_close(down(ginv, c), inv, kSums, "bn saved 1/std");

  std::vector<uint16_t> dx(m);
  std::vector<float> dgamma(c), dbeta(c);
  uint16_t* gdx = up(dx);
  float *gdg = up(dgamma), *gdb = up(dbeta);
  cpu_.batchnorm_backward(x.data(), dy.data(), gamma.data(), dx.data(), dgamma.data(), dbeta.data(),
                          n, c, hw, 1e-5f, mean.data(), inv.data());
  gpu_->batchnorm_backward(gx, gdy, gg, gdx, gdg, gdb, n, c, hw, 1e-5f, gmean, ginv);
  // dx subtracts the means of dy and dy * xhat from dy: float results that cancel, then
  // one rounding.
  expect_close(down_act(gdx, m), widen(dx), 2 * act_tol(), "bn dx");
  expect_close(down(gdg, c), dgamma, kSums, "bn dgamma");
  expect_close(down(gdb, c), dbeta, kSums, "bn dbeta");
  gpu_->fill_zero(gdg, c);
  gpu_->fill_zero(gdb, c);
  gpu_->batchnorm_backward(gx, gdy, gg, nullptr, gdg, gdb, n, c, hw, 1e-5f, gmean, ginv);
  expect_close(down(gdg, c), dgamma, kSums, "bn dgamma without dx");
  expect_close(down(gdb, c), dbeta, kSums, "bn dbeta without dx");

  cpu_.batchnorm_forward_inference(x.data(), gamma.data(), beta.data(), y.data(), n, c, hw, 1e-5f,
                                   rm.data(), rv.data());
  gpu_->batchnorm_forward_inference(gx, gg, gb, gy, n, c, hw, 1e-5f, up(rm), up(rv));
  expect_close(down_act(gy, m), widen(y), act_tol(), "bn inference");
}

// Channels last (kernels/batchnorm.cu on rows [m, c]): batchnorm_add_relu_* computes what
// the separate operations of the same backend compute, bit for bit, and what the CPU
// computes on the same rows (an NCHW batch of m samples with hw = 1) within rounding. The
// cases take the 16-byte path, the one-value path (c not a multiple of 8, data not 16-byte
// aligned) and many row chunks (1,100 in the last: more than one round of the merge kernels'
// 128 lanes x 8 running sums).
TEST_P(MixedVsCpu, ChannelsLastBatchNormAddRelu) {
  gpu_ = make_gpu(false, /*channels_last=*/true);
  struct Case {
    int n, c, hw;
    size_t offset;  // values before the data in each device buffer
  };
  const float eps = 1e-5f, momentum = 0.1f;
  for (const Case k : {Case{4, 64, 50, 0}, Case{3, 6, 35, 0}, Case{2, 3, 7, 0},
                       Case{16, 16, 1000, 0}, Case{4, 64, 50, 1}, Case{128, 64, 1100, 0}}) {
    SCOPED_TRACE("n=" + std::to_string(k.n) + " c=" + std::to_string(k.c) +
                 " hw=" + std::to_string(k.hw) + " offset=" + std::to_string(k.offset));
    const int rows = k.n * k.hw, c = k.c;
    const size_t count = static_cast<size_t>(rows) * c;
    std::vector<float> xf = random_vector(count, 1, 2.0);
    for (size_t i = 0; i < count; ++i) xf[i] += static_cast<float>(i % c) - 2.0f;
    const auto x = act(xf), z = act(random_vector(count, 2)), dy = act(random_vector(count, 3));
    const auto gamma = random_vector(c, 4), beta = random_vector(c, 5);
    const std::vector<float> rm0(c, 0.1f), rv0(c, 1.5f), zeros(c);
    auto dev = [&](const std::vector<uint16_t>& h) {
      std::vector<uint16_t> padded(k.offset);
      padded.insert(padded.end(), h.begin(), h.end());
      return up(padded) + k.offset;
    };
    const std::vector<uint16_t> empty(count);
    const uint16_t *gx = dev(x), *gz = dev(z), *gdy = dev(dy);
    uint16_t *sep = dev(empty), *fused = dev(empty);
    float *gg = up(gamma), *gb = up(beta);
    float *rm1 = up(rm0), *rv1 = up(rv0), *mean1 = up(zeros), *inv1 = up(zeros);
    float *rm2 = up(rm0), *rv2 = up(rv0), *mean2 = up(zeros), *inv2 = up(zeros);

    // Forward, training: separate operations, fused, and the CPU.
    gpu_->batchnorm_forward_training(gx, gg, gb, sep, rows, c, 1, eps, momentum, rm1, rv1, mean1,
                                     inv1);
    gpu_->add(sep, gz, sep, count);
    gpu_->relu_forward(sep, sep, count);
    gpu_->batchnorm_add_relu_forward(true, gx, gz, gg, gb, fused, k.n, c, k.hw, eps, momentum, rm2,
                                     rv2, mean2, inv2);
    const std::vector<float> y = down_act(fused, count);
    expect_same(y, down_act(sep, count), "fused forward");
    expect_same(down(mean2, c), down(mean1, c), "fused saved mean");
    expect_same(down(inv2, c), down(inv1, c), "fused saved 1/std");
    expect_same(down(rm2, c), down(rm1, c), "fused running mean");
    expect_same(down(rv2, c), down(rv1, c), "fused running variance");
    std::vector<uint16_t> cy(count);
    std::vector<float> crm = rm0, crv = rv0, cmean(c), cinv(c);
    cpu_.batchnorm_add_relu_forward(true, x.data(), z.data(), gamma.data(), beta.data(), cy.data(),
                                    rows, c, 1, eps, momentum, crm.data(), crv.data(), cmean.data(),
                                    cinv.data());
    expect_close(y, widen(cy), act_tol(), "forward against the cpu");
    expect_close(down(mean2, c), cmean, kSums, "saved mean against the cpu");
    expect_close(down(inv2, c), cinv, kSums, "saved 1/std against the cpu");
    expect_close(down(rm2, c), crm, kSums, "running mean against the cpu");
    expect_close(down(rv2, c), crv, kSums, "running variance against the cpu");

    // Without the addition, and in evaluation.
    gpu_->batchnorm_add_relu_forward(true, gx, nullptr, gg, gb, fused, k.n, c, k.hw, eps, momentum,
                                     rm2, rv2, mean2, inv2);
    gpu_->batchnorm_forward_training(gx, gg, gb, sep, rows, c, 1, eps, momentum, rm1, rv1, mean1,
                                     inv1);
    gpu_->relu_forward(sep, sep, count);
    expect_same(down_act(fused, count), down_act(sep, count), "fused forward without z");
    gpu_->batchnorm_add_relu_forward(false, gx, gz, gg, gb, fused, k.n, c, k.hw, eps, momentum, rm2,
                                     rv2, nullptr, nullptr);
    gpu_->batchnorm_forward_inference(gx, gg, gb, sep, k.n, c, k.hw, eps, rm1, rv1);
    gpu_->add(sep, gz, sep, count);
    gpu_->relu_forward(sep, sep, count);
    expect_same(down_act(fused, count), down_act(sep, count), "fused evaluation");
    std::vector<uint16_t> cinf(count);
    std::vector<float> grm = down(rm2, c), grv = down(rv2, c);
    cpu_.batchnorm_add_relu_forward(false, x.data(), z.data(), gamma.data(), beta.data(),
                                    cinf.data(), rows, c, 1, eps, momentum, grm.data(), grv.data(),
                                    nullptr, nullptr);
    expect_close(down_act(fused, count), widen(cinf), act_tol(), "evaluation against the cpu");

    // Backward from the first forward's output y (given to the CPU too, so that both mask
    // the same cells).
    const std::vector<uint16_t> y16 = act(y);
    const uint16_t* gy = dev(y16);
    uint16_t *gsep_g = dev(empty), *gsep_dx = dev(empty), *gdz = dev(empty), *gdx = dev(empty);
    float *dg1 = up(zeros), *db1 = up(zeros), *dg2 = up(zeros), *db2 = up(zeros);
    gpu_->relu_backward(gy, gdy, gsep_g, count);
    gpu_->batchnorm_backward(gx, gsep_g, gg, gsep_dx, dg1, db1, rows, c, 1, eps, mean1, inv1);
    gpu_->batchnorm_add_relu_backward(gx, gy, gdy, gdz, gg, gdx, dg2, db2, k.n, c, k.hw, eps, mean2,
                                      inv2);
    const std::vector<float> dz = down_act(gdz, count), dx = down_act(gdx, count);
    expect_same(dz, down_act(gsep_g, count), "fused dz");
    expect_same(dx, down_act(gsep_dx, count), "fused dx");
    expect_same(down(dg2, c), down(dg1, c), "fused dgamma");
    expect_same(down(db2, c), down(db1, c), "fused dbeta");
    // dz may be dy; dx may be null.
    uint16_t* gdy_copy = dev(dy);
    gpu_->batchnorm_add_relu_backward(gx, gy, gdy_copy, gdy_copy, gg, nullptr, dg2, db2, k.n, c,
                                      k.hw, eps, mean2, inv2);
    expect_same(down_act(gdy_copy, count), dz, "fused dz over dy");
    expect_same(down(dg2, c), down(dg1, c), "fused dgamma without dx");
    std::vector<uint16_t> cdz(count), cdx(count);
    std::vector<float> cdg(c), cdb(c);
    cpu_.batchnorm_add_relu_backward(x.data(), y16.data(), dy.data(), cdz.data(), gamma.data(),
                                     cdx.data(), cdg.data(), cdb.data(), rows, c, 1, eps,
                                     cmean.data(), cinv.data());
    expect_same(dz, widen(cdz), "dz against the cpu");
    expect_close(dx, widen(cdx), 2 * act_tol(), "dx against the cpu");
    expect_close(down(dg2, c), cdg, kSums, "dgamma against the cpu");
    expect_close(down(db2, c), cdb, kSums, "dbeta against the cpu");
  }
}

// A non-zero skip flag (device memory) leaves parameters and velocity untouched; zero or
// none updates them as the CPU does.
TEST_P(MixedVsCpu, SgdWithSkipFlag) {
  const size_t n = 4099;
  const std::vector<float> no{0.0f}, yes{1.0f};
  const float *gno = up(no), *gyes = up(yes);
  for (int v = 0; v < 3; ++v) {
    const SgdParams sgd{0.05f, v == 0 ? 0.0f : 0.9f, 1e-4f, v == 2};
    const auto p = random_vector(n, 1), g = random_vector(n, 2), vel = random_vector(n, 3);
    const float* gg = up(g);
    for (int skip = 0; skip < 3; ++skip) {  // null, 0, 1
      const float* cpu_flag = skip == 0 ? nullptr : skip == 1 ? no.data() : yes.data();
      const float* gpu_flag = skip == 0 ? nullptr : skip == 1 ? gno : gyes;
      const std::string what = "sgd " + std::to_string(v) + " skip " + std::to_string(skip);
      std::vector<float> wp = p, wv = vel;
      cpu_.sgd_update(wp.data(), g.data(), wv.data(), n, sgd, cpu_flag);
      float *dp = up(p), *dv = up(vel);
      gpu_->sgd_update(dp, gg, dv, n, sgd, gpu_flag);
      if (skip == 2) {
        expect_same(wp, p, what + " cpu params");
        expect_same(down(dp, n), p, what + " params");
        expect_same(down(dv, n), vel, what + " velocity");
      } else {
        expect_close(down(dp, n), wp, 1e-5, what + " params");
        expect_close(down(dv, n), wv, 1e-5, what + " velocity");
      }
    }
  }
}

// unscale_grads over several ranges per step (an overflow in one is remembered across the
// others), then update_loss_scale: backoff and a skipped step on overflow, growth after
// `interval` good steps. Bit for bit against the CPU and the documented arithmetic.
TEST_P(MixedVsCpu, DynamicLossScaling) {
  using S = LossScaleState;
  const float growth = 2.0f, backoff = 0.5f;
  const int interval = 3;
  const size_t n = 3000;
  std::vector<float> cpu_state(S::kCount, 0.0f);
  cpu_state[S::kScale] = 1024.0f;
  float* state = up(cpu_state);
  auto expect_state = [&](float scale, float good, float skipped, const std::string& what) {
    const std::vector<float> got = down(state, S::kCount);
    expect_same(got, cpu_state, what + ": state against the cpu");
    EXPECT_EQ(got[S::kScale], scale) << what;
    EXPECT_EQ(got[S::kGood], good) << what;
    EXPECT_EQ(got[S::kFoundInf], 0.0f) << what;
    EXPECT_EQ(got[S::kSkipped], skipped) << what;
  };
  // One step over three ranges; `poison` puts an infinity and a NaN in the middle one.
  auto step = [&](bool poison, uint64_t seed, const std::string& what) {
    std::vector<float> grads = random_vector(n, seed, 1000.0);
    if (poison) {
      grads[n / 2] = std::numeric_limits<float>::infinity();
      grads[n / 2 + 7] = std::numeric_limits<float>::quiet_NaN();
    }
    float* g = up(grads);
    const size_t cuts[] = {0, n / 3, 2 * n / 3, n};
    for (int r = 0; r < 3; ++r) {
      const size_t lo = cuts[r], len = cuts[r + 1] - cuts[r];
      cpu_.unscale_grads(grads.data() + lo, len, cpu_state.data());
      gpu_->unscale_grads(g + lo, len, state);
      EXPECT_EQ(down(state, S::kCount)[S::kFoundInf], cpu_state[S::kFoundInf])
          << what << ", range " << r;
    }
    EXPECT_EQ(cpu_state[S::kFoundInf], poison ? 1.0f : 0.0f) << what;
    expect_same(down(g, n), grads, what + ": unscaled gradients");
    cpu_.update_loss_scale(cpu_state.data(), growth, backoff, interval);
    gpu_->update_loss_scale(state, growth, backoff, interval);
  };
  step(false, 1, "good step 1");
  expect_state(1024.0f, 1.0f, 0.0f, "after a good step");
  step(true, 2, "overflow");
  expect_state(512.0f, 0.0f, 1.0f, "after an overflow");
  step(false, 3, "good step 2");
  step(false, 4, "good step 3");
  expect_state(512.0f, 2.0f, 1.0f, "after two good steps");
  step(false, 5, "good step 4");
  expect_state(1024.0f, 0.0f, 1.0f, "after interval good steps");
}

// Embedding with 16-bit ids, table copy and dy: rows copied as stored, repeated ids' rows
// summed in float32 in row order on both backends: bit for bit.
TEST_P(MixedVsCpu, EmbeddingBitForBit) {
  const int vocab = 9, dim = 45, rows = 3 * 23;
  std::vector<float> idf(rows);
  for (size_t i = 0; i < idf.size(); ++i) idf[i] = static_cast<float>((i * 5 + i / 4) % vocab);
  const auto ids = act(idf), table = act(random_vector(size_t(vocab) * dim, 7)),
             dy = act(random_vector(size_t(rows) * dim, 8));
  std::vector<uint16_t> y(dy.size());
  std::vector<float> dtable(table.size());
  cpu_.embedding_forward(ids.data(), table.data(), y.data(), rows, vocab, dim);
  cpu_.embedding_backward(ids.data(), dy.data(), dtable.data(), rows, vocab, dim);
  uint16_t *gids = up(ids), *gy = up(y);
  float* gdt = up(std::vector<float>(dtable.size(), -1.0f));
  gpu_->embedding_forward(gids, up(table), gy, rows, vocab, dim);
  gpu_->embedding_backward(gids, up(dy), gdt, rows, vocab, dim);
  expect_same(down_act(gy, y.size()), widen(y), "embedding forward");
  expect_same(down(gdt, dtable.size()), dtable, "embedding backward");
}

}  // namespace
}  // namespace hpctrain
