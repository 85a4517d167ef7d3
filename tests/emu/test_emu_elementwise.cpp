// kernels/ element-wise, conversion, reduction, loss, optimizer and layout kernels under
// the emulation against the CPU backend (emu/emu_fixture.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/sample_type.hpp"
#include "emu/emu_fixture.hpp"

namespace hpctrain::test {
namespace {

// Packed (n a multiple of 8, aligned) and one-value paths: bit for bit.
TEST_P(EmuVsCpu, ElementwiseBitForBit) {
  for (const size_t n : {size_t{1024}, size_t{1023}}) {
    for (const size_t offset : {size_t{0}, size_t{1}}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(offset));
      const std::vector<float> a = random_vector(n, 1), b = random_vector(n, 2);
      const Acts xa = acts(a, offset), xb = acts(b, offset);
      std::vector<std::vector<float>> want;
      for (int op = 0; op < 4; ++op) {
        Acts y(t_, n);
        if (op == 0) cpu_.add(xa.data(), xb.data(), y.data(), n);
        if (op == 1) cpu_.multiply(xa.data(), xb.data(), y.data(), n);
        if (op == 2) cpu_.relu_forward(xa.data(), y.data(), n);
        if (op == 3) cpu_.relu_backward(xa.data(), xb.data(), y.data(), n);
        want.push_back(y.floats());
      }
      const auto got = both_orders([&] {
        std::vector<std::vector<float>> out;
        for (int op = 0; op < 4; ++op) {
          Acts y = Acts::nan(t_, n, offset);
          if (op == 0) kernels::add(t_, xa.data(), xb.data(), y.data(), n, kStream);
          if (op == 1) kernels::multiply(t_, xa.data(), xb.data(), y.data(), n, kStream);
          if (op == 2) kernels::relu_forward(t_, xa.data(), y.data(), n, kStream);
          if (op == 3) kernels::relu_backward(t_, xa.data(), xb.data(), y.data(), n, kStream);
          out.push_back(y.floats());
        }
        return out;
      });
      for (int op = 0; op < 4; ++op) expect_same(got[op], want[op], "op " + std::to_string(op));
    }
  }
}

// Conversions, input decoding and biases: bit for bit.
TEST_P(EmuVsCpu, ConversionsDecodingAndBiases) {
  std::vector<float> v = random_vector(1000, 1, 3.0);
  for (const float x : {0.0f, -0.0f, 1e-8f, 65519.0f, 65520.0f, -70000.0f, 3e38f,
                        std::numeric_limits<float>::infinity()}) {
    v.push_back(x);
  }
  std::vector<uint8_t> bytes(256 * 3 + 1);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h < 65536; h += 3) {
    if ((h & 0x7c00u) != 0x7c00u) halves.push_back(static_cast<uint16_t>(h));
  }
  std::vector<int32_t> ids(301);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i * 13 % 2048);
  const int rows = 13, cols = 37, n = 3, c = 5, hw = 63;
  const std::vector<float> yf = random_vector(size_t(rows) * cols, 2),
                           img = random_vector(size_t(n) * c * hw, 3),
                           bias = random_vector(cols, 4), cbias = random_vector(c, 5);
  Acts convert_want(t_, v.size()), u8_want(t_, bytes.size()), f16_want(t_, halves.size()),
      ids_want(t_, ids.size());
  cpu_.convert(v.data(), convert_want.data(), v.size());
  cpu_.decode_input(bytes.data(), SampleType::kU8, bytes.size(), {}, u8_want.data());
  cpu_.decode_input(halves.data(), SampleType::kF16, halves.size(), {}, f16_want.data());
  cpu_.decode_input(ids.data(), SampleType::kToken, ids.size(), {}, ids_want.data());
  Acts bias_want = acts(yf), cbias_want = acts(img);
  cpu_.add_bias(bias_want.data(), bias.data(), rows, cols);
  cpu_.add_channel_bias(cbias_want.data(), cbias.data(), n, c, hw);
  const auto got = both_orders([&] {
    Acts cv = Acts::nan(t_, v.size()), u8 = Acts::nan(t_, bytes.size()),
         f16 = Acts::nan(t_, halves.size()), tok = Acts::nan(t_, ids.size()), y = acts(yf),
         im = acts(img);
    std::vector<float> back(v.size(), kNaN);
    kernels::convert(t_, v.data(), cv.data(), v.size(), kStream);
    kernels::convert_to_float(t_, cv.data(), back.data(), v.size(), kStream);
    kernels::decode_u8(t_, bytes.data(), bytes.size(), kU8Scale, {}, u8.data(), kStream);
    kernels::decode_f16(t_, halves.data(), halves.size(), {}, f16.data(), kStream);
    kernels::decode_i32(t_, ids.data(), ids.size(), tok.data(), kStream);
    kernels::add_bias(t_, y.data(), bias.data(), rows, cols, kStream);
    kernels::add_channel_bias(t_, im.data(), cbias.data(), n, c, hw, kStream);
    return results(cv.floats(), back, u8.floats(), f16.floats(), y.floats(), im.floats(),
                   tok.floats());
  });
  expect_same(got[0], convert_want.floats(), "convert");
  expect_same(got[1], convert_want.floats(), "convert_to_float");
  expect_same(got[2], u8_want.floats(), "decode_u8");
  expect_same(got[3], f16_want.floats(), "decode_f16");
  expect_same(got[4], bias_want.floats(), "add_bias");
  expect_same(got[5], cbias_want.floats(), "add_channel_bias");
  expect_same(got[6], ids_want.floats(), "decode_i32");
}

// Decoding with per-channel normalisation (InputNorm: 3 channels of 7 values per sample),
// for uint8, float16 and float32 input: the CPU's decode_input bit for bit.
TEST_P(EmuVsCpu, DecodeNormalizedBitForBit) {
  constexpr int kChannels = 3;
  constexpr size_t kPlane = 7, kN = 5 * kChannels * kPlane;
  const std::vector<float> mean = {0.25f, 0.5f, 0.125f}, inv_std = {3.0f, 1.0f / 0.3f, 7.5f};
  const InputNorm norm{mean.data(), inv_std.data(), kChannels, kPlane};
  std::vector<uint8_t> bytes(kN);
  std::vector<uint16_t> halves(kN);
  for (size_t i = 0; i < kN; ++i) {
    bytes[i] = static_cast<uint8_t>(i * 37 + 11);
    halves[i] = static_cast<uint16_t>(0x3000 + i * 41);  // finite halves around 0.1 .. 1
  }
  const std::vector<float> floats = random_vector(kN, 9);
  Acts u8_want(t_, kN), f16_want(t_, kN), f32_want(t_, kN);
  cpu_.decode_input(bytes.data(), SampleType::kU8, kN, norm, u8_want.data());
  cpu_.decode_input(halves.data(), SampleType::kF16, kN, norm, f16_want.data());
  cpu_.decode_input(floats.data(), SampleType::kF32, kN, norm, f32_want.data());
  const auto got = both_orders([&] {
    Acts u8 = Acts::nan(t_, kN), f16 = Acts::nan(t_, kN), f32 = Acts::nan(t_, kN);
    kernels::decode_u8(t_, bytes.data(), kN, kU8Scale, norm, u8.data(), kStream);
    kernels::decode_f16(t_, halves.data(), kN, norm, f16.data(), kStream);
    kernels::decode_f32(t_, floats.data(), kN, norm, f32.data(), kStream);
    return results(u8.floats(), f16.floats(), f32.floats());
  });
  expect_same(got[0], u8_want.floats(), "decode_u8 normalised");
  expect_same(got[1], f16_want.floats(), "decode_f16 normalised");
  expect_same(got[2], f32_want.floats(), "decode_f32 normalised");
}

// The mask in the activation type (1 / (1 - p) rounded) from the counter-based generator.
TEST_P(EmuVsCpu, DropoutBitForBit) {
  const Acts x = acts(random_vector(4097, 5));
  for (const float p : {0.3f, 0.5f}) {
    Acts y(t_, 4097), mask(t_, 4097);
    cpu_.dropout_forward(x.data(), y.data(), mask.data(), 4097, p, 77);
    const auto got = both_orders([&] {
      Acts gy = Acts::nan(t_, 4097), gmask = Acts::nan(t_, 4097);
      kernels::dropout_forward(t_, x.data(), gy.data(), gmask.data(), 4097, p, 77, kStream);
      return results(gy.floats(), gmask.floats());
    });
    expect_same(got[0], y.floats(), "dropout y");
    expect_same(got[1], mask.floats(), "dropout mask");
  }
}

// SGD (plain, momentum, Nesterov; skipped by a non-zero flag) and dynamic loss scaling:
// an overflow found in one range of gradients, a skipped step, growth after `interval`.
TEST(EmuKernels, SgdAndLossScaling) {
  CpuBackend cpu_(1, CpuBackend::kDefaultConvChunkBytes, false, DType::kF32);
  const size_t n = 4099;
  const std::vector<float> p = random_vector(n, 1), g = random_vector(n, 2),
                           vel = random_vector(n, 3);
  for (int v = 0; v < 3; ++v) {
    const SgdParams sgd{0.05f, v == 0 ? 0.0f : 0.9f, 1e-4f, v == 2};
    for (const float flag : {0.0f, 1.0f}) {
      std::vector<float> wp = p, wv = vel;
      cpu_.sgd_update(wp.data(), g.data(), wv.data(), n, sgd, &flag);
      const auto got = both_orders([&] {
        std::vector<float> gp = p, gv = vel;
        kernels::sgd_update(gp.data(), g.data(), gv.data(), n, sgd, &flag, kStream);
        return results(gp, gv);
      });
      expect_close(got[0], wp, 1e-6, "sgd params " + std::to_string(v));
      expect_close(got[1], wv, 1e-6, "sgd velocity " + std::to_string(v));
      if (flag != 0.0f) expect_same(got[0], p, "skipped step");
    }
  }
  using S = LossScaleState;
  std::vector<float> want(S::kCount, 0.0f), state(S::kCount, 0.0f);
  want[S::kScale] = state[S::kScale] = 1024.0f;
  for (int step = 0; step < 5; ++step) {
    std::vector<float> grads = random_vector(n, 10 + step, 1000.0);
    if (step == 1) grads[n / 2] = std::numeric_limits<float>::infinity();
    std::vector<float> mine = grads;
    for (const size_t lo : {size_t{0}, n / 3, 2 * n / 3}) {
      const size_t len = (lo == 2 * n / 3 ? n : lo + n / 3) - lo;
      cpu_.unscale_grads(grads.data() + lo, len, want.data());
      kernels::unscale_grads(mine.data() + lo, len, state.data(), kStream);
    }
    cpu_.update_loss_scale(want.data(), 2.0f, 0.5f, 3);
    kernels::update_loss_scale(state.data(), 2.0f, 0.5f, 3, kStream);
    expect_same(mine, grads, "unscaled gradients, step " + std::to_string(step));
    expect_same(state, want, "loss-scale state, step " + std::to_string(step));
  }
  EXPECT_EQ(state[S::kSkipped], 1.0f);
  EXPECT_EQ(state[S::kScale], 1024.0f) << "halved once, doubled after 3 good steps";
}

// A step's loss statistics join the epoch's unless the step was skipped.
TEST(EmuKernels, MergeLossStats) {
  CpuBackend cpu_(1, CpuBackend::kDefaultConvChunkBytes, false, DType::kF32);
  for (const float skip : {0.0f, 1.0f}) {
    LossStats want{1.5, 2.0, 3.0}, got = want, step{0.25, 1.0, 4.0}, mine = step;
    cpu_.merge_loss_stats(&want, &step, &skip);
    kernels::merge_loss_stats(&got, &mine, &skip, kStream);
    EXPECT_EQ(got.loss_sum, want.loss_sum);
    EXPECT_EQ(got.correct, want.correct);
    EXPECT_EQ(got.count, skip != 0.0f ? 3.0 : 7.0);
    EXPECT_EQ(mine.loss_sum + mine.correct + mine.count, 0.0) << "the step's statistics cleared";
  }
}

// Gradient accumulation and scaling of float32 arrays: bit for bit.
TEST(EmuKernels, AccumulateAndScale) {
  CpuBackend cpu_(1, CpuBackend::kDefaultConvChunkBytes, false, DType::kF32);
  const size_t n = 4099;
  const std::vector<float> a = random_vector(n, 1), b = random_vector(n, 2);
  std::vector<float> want = a;
  cpu_.accumulate(want.data(), b.data(), n);
  cpu_.scale(want.data(), n, 0.25f);
  const auto got = both_orders([&] {
    std::vector<float> sum = a;
    kernels::accumulate(sum.data(), b.data(), n, kStream);
    kernels::scale(sum.data(), n, 0.25f, kStream);
    return results(sum);
  });
  expect_same(got[0], want, "accumulate, then scale");
}

// Adam and AdamW from a mid-run state (step 4), over three steps of which the second is
// skipped by the flag: parameters, moments and the step counter as the CPU's.
TEST(EmuKernels, AdamAndStepCount) {
  CpuBackend cpu_(1, CpuBackend::kDefaultConvChunkBytes, false, DType::kF32);
  const size_t n = 4099;
  std::vector<float> v0 = random_vector(n, 6);
  for (float& x : v0) x = x * x;  // a second moment is not negative
  const std::vector<float> p0 = random_vector(n, 4), m0 = random_vector(n, 5);
  for (const bool decoupled : {false, true}) {
    AdamParams adam;
    adam.lr = 1e-3f;
    adam.weight_decay = 0.01f;
    adam.decoupled = decoupled;
    std::vector<float> wp = p0, wm = m0, wv = v0, wstep = {4.0f};
    std::vector<std::vector<float>> grads;
    for (int s = 0; s < 3; ++s) {
      grads.push_back(random_vector(n, 20 + s));
      const float flag = s == 1 ? 1.0f : 0.0f;
      cpu_.count_step(wstep.data(), &flag);
      cpu_.adam_update(wp.data(), grads[s].data(), wm.data(), wv.data(), n, adam, wstep.data(),
                       &flag);
    }
    const auto got = both_orders([&] {
      std::vector<float> gp = p0, gm = m0, gv = v0, gstep = {4.0f};
      for (int s = 0; s < 3; ++s) {
        const float flag = s == 1 ? 1.0f : 0.0f;
        kernels::count_step(gstep.data(), &flag, kStream);
        kernels::adam_update(gp.data(), grads[s].data(), gm.data(), gv.data(), n, adam,
                             gstep.data(), &flag, kStream);
      }
      return results(gp, gm, gv, gstep);
    });
    const std::string what = decoupled ? "adamw " : "adam ";
    expect_close(got[0], wp, 1e-6, what + "params");
    expect_close(got[1], wm, 1e-6, what + "first moment");
    expect_close(got[2], wv, 1e-6, what + "second moment");
    expect_same(got[3], {6.0f}, what + "step count (one step skipped)");
  }
}

// Bias gradients: tall (channels last: samples x positions rows) and short matrices, and
// NCHW channels; batch normalisation's parameter gradients in NCHW.
TEST_P(EmuVsCpu, Reductions) {
  for (const auto& shape : {std::pair{3001, 40}, std::pair{5, 70}, std::pair{1, 1}}) {
    const int rows = shape.first, cols = shape.second;
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const Acts dy = acts(random_vector(size_t(rows) * cols, 3));
    std::vector<float> want(cols);
    cpu_.sum_rows(dy.data(), want.data(), rows, cols);
    const auto got = both_orders([&] {
      std::vector<float> out(cols, kNaN);
      kernels::sum_rows(t_, dy.data(), out.data(), rows, cols, kStream);
      return results(out);
    });
    expect_close(got[0], want, kSums, "sum_rows");
  }
  const int n = 3, c = 5, hw = 77;
  const Acts dy = acts(random_vector(size_t(n) * c * hw, 4));
  std::vector<float> want(c);
  cpu_.sum_channels(dy.data(), want.data(), n, c, hw);
  const auto got = both_orders([&] {
    std::vector<float> out(c, kNaN);
    kernels::sum_channels(t_, dy.data(), out.data(), n, c, hw, kStream);
    return results(out);
  });
  expect_close(got[0], want, kSums, "sum_channels");

  const Acts x = acts(random_vector(size_t(n) * c * hw, 5));
  const std::vector<float> gamma = random_vector(c, 6), mean = random_vector(c, 7),
                           invstd(c, 1.25f);
  std::vector<float> dg(c), db(c);
  cpu_.batchnorm_backward(x.data(), dy.data(), gamma.data(), nullptr, dg.data(), db.data(), n, c,
                          hw, 1e-5f, mean.data(), invstd.data());
  const auto bn = both_orders([&] {
    std::vector<float> gdg(c, kNaN), gdb(c, kNaN);
    kernels::batchnorm_param_grads(t_, x.data(), dy.data(), gdg.data(), gdb.data(), n, c, hw,
                                   mean.data(), invstd.data(), kStream);
    return results(gdg, gdb);
  });
  expect_close(bn[0], dg, kSums, "dgamma");
  expect_close(bn[1], db, kSums, "dbeta");
}

// Shuffles (warp arg-max and sums) and block sums; rows fewer and more than the block's 32
// warps, cols not a multiple of 32.
TEST_P(EmuVsCpu, SoftmaxCrossEntropy) {
  const int cols = 45;
  for (const int rows : {19, 70}) {
    SCOPED_TRACE("rows=" + std::to_string(rows));
    const Acts logits = acts(random_vector(size_t(rows) * cols, 5, 3.0));
    std::vector<int32_t> labels(rows);
    for (int r = 0; r < rows; ++r) labels[r] = (r * 7) % cols;
    Acts want_d(t_, size_t(rows) * cols);
    LossStats want;
    cpu_.softmax_xent(logits.data(), labels.data(), rows, cols, 0.5f, nullptr, want_d.data(),
                      &want);
    const auto got = both_orders([&] {
      Acts d = Acts::nan(t_, size_t(rows) * cols);
      LossStats s;
      kernels::softmax_xent(t_, logits.data(), labels.data(), rows, cols, 0.5f, nullptr, d.data(),
                            &s, kStream);
      return results(d.floats(), std::vector<float>{static_cast<float>(s.loss_sum),
                                                    static_cast<float>(s.correct),
                                                    static_cast<float>(s.count)});
    });
    expect_close(got[0], want_d.floats(), act_tol(), "dlogits");
    expect_close(got[1],
                 {static_cast<float>(want.loss_sum), static_cast<float>(want.correct),
                  static_cast<float>(want.count)},
                 kSums, "loss, correct, count");
  }
}

// Shared-memory tiles with partial edges (a = 37), and the kernels for few rows (a = 1 and 3:
// an image's channels; 9: a 3x3 filter's positions) and, in the way back (70 rows of a
// columns), for few columns.
TEST_P(EmuVsCpu, Transpose) {
  const int n = 2, b = 70;
  for (const int a : {37, 3, 1, 9}) {
    SCOPED_TRACE("a=" + std::to_string(a));
    const Acts src = acts(random_vector(size_t(n) * a * b, 6));
    const std::vector<float> v = src.floats();
    std::vector<float> want(v.size());
    for (int i = 0; i < n; ++i) {
      for (int r = 0; r < a; ++r) {
        for (int q = 0; q < b; ++q)
          want[(size_t(i) * b + q) * a + r] = v[(size_t(i) * a + r) * b + q];
      }
    }
    const auto got = both_orders([&] {
      Acts out = Acts::nan(t_, size_t(n) * a * b), filter = Acts::nan(t_, size_t(n) * a * b);
      std::vector<float> back(size_t(n) * a * b, kNaN);
      kernels::transpose(t_, src.data(), out.data(), n, a, b, kStream);
      kernels::convert_transposed(t_, v.data(), filter.data(), n, a, b, kStream);
      kernels::convert_to_float_transposed(t_, out.data(), back.data(), n, b, a, kStream);
      return results(out.floats(), filter.floats(), back);
    });
    expect_same(got[0], want, "transpose");
    expect_same(got[1], want, "convert_transposed");
    expect_same(got[2], v, "convert_to_float_transposed");
  }
}

// One block's fixed-order double sum of squares, then the scale read on the device.
TEST_P(EmuVsCpu, ClipByGlobalNorm) {
  if (t_ != DType::kF32) GTEST_SKIP() << "float32 gradients only";
  // More values than the kernel's threads (its grid-stride loop takes some twice).
  std::vector<float> g = random_vector(70001, 41);
  float want_sum = 0.5f;  // adds to what is there
  cpu_.sum_squares(g.data(), g.size(), &want_sum);
  std::vector<float> want = g;
  cpu_.clip_by_norm(want.data(), want.size(), &want_sum, 3.0f);
  const auto got = both_orders([&] {
    float sum = 0.5f;
    std::vector<float> x = g;
    std::vector<double> partials(kernels::kSumSquaresBlocks, kNaN);
    kernels::sum_squares(x.data(), x.size(), &sum, partials.data(), kStream);
    kernels::clip_by_norm(x.data(), x.size(), &sum, 3.0f, kStream);
    return results(std::vector<float>{sum}, x);
  });
  expect_close(got[0], {want_sum}, 1e-6, "sum of squares");
  expect_close(got[1], want, 1e-6, "clipped");
}

INSTANTIATE_TEST_SUITE_P(Act, EmuVsCpu, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         type_name);

}  // namespace
}  // namespace hpctrain::test
