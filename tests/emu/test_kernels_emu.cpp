// kernels/ run on the host by the CUDA emulation (emu/cuda_emu.hpp), against the CPU
// backend with the same activation type (float32, bfloat16, float16): so that CI, which
// has no GPU, checks the kernels' indexing, packing, shared-memory merges and rounding,
// under AddressSanitizer (an access outside a buffer fails the test as it would fail
// compute-sanitizer). Each kernel call runs with threads and blocks in forward and in
// reverse order, and the two results must agree bit for bit (a race would not). Scratch
// and outputs start as NaN, so a value a kernel reads but nobody wrote shows.
//
// Tolerances as in tests/gpu/test_cuda_mixed.cpp: one rounding of the activation type for
// values reduced in another order than the CPU's, 1e-4 for float32 sums; element-wise
// results bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "backend/conv_shape.hpp"
#include "backend/cpu_backend.hpp"
#include "common/compare.hpp"
#include "core/convert.hpp"
#include "core/dtype.hpp"
#include "core/random.hpp"
#include "core/sample_type.hpp"
#include "emu/cuda_emu.hpp"  // first: renames hpctrain::kernels to kernels_emu
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain {
namespace {

using test::expect_close;
using test::expect_same;
using test::random_vector;
using test::to_nhwc;

constexpr double kSums = 1e-4;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr cudaStream_t kStream = nullptr;

// Runs f (which recomputes everything from its inputs and returns all its results) with
// forward and with reverse thread order; the two must agree bit for bit.
std::vector<std::vector<float>> both_orders(
    const std::function<std::vector<std::vector<float>>()>& f) {
  emu::set_order(emu::Order::kForward);
  const auto forward = f();
  emu::set_order(emu::Order::kReverse);
  const auto reverse = f();
  emu::set_order(emu::Order::kForward);
  EXPECT_EQ(forward.size(), reverse.size());
  for (size_t k = 0; k < std::min(forward.size(), reverse.size()); ++k) {
    expect_same(reverse[k], forward[k], "result " + std::to_string(k) + " in reverse order");
  }
  return forward;
}

std::string type_name(const ::testing::TestParamInfo<DType>& info) { return to_string(info.param); }

// The results of one run, for both_orders.
template <typename... V>
std::vector<std::vector<float>> results(V... v) {
  return {std::vector<float>(std::move(v))...};
}

// Activations of one type in host memory, `offset` values after a 16-byte boundary (an
// offset of 1 makes the kernels take their one-value path).
class Acts {
 public:
  Acts(DType t, size_t n, size_t offset = 0)
      : t_(t), n_(n), offset_(offset), bytes_((n + offset) * dtype_size(t) + 16) {}
  Acts(DType t, const std::vector<float>& v, size_t offset = 0) : Acts(t, v.size(), offset) {
    from_float(t_, v.data(), data(), n_);
  }
  static Acts nan(DType t, size_t n, size_t offset = 0) {
    return Acts(t, std::vector<float>(n, kNaN), offset);
  }
  void* data() { return bytes_.data() + offset_ * dtype_size(t_); }
  const void* data() const { return bytes_.data() + offset_ * dtype_size(t_); }
  std::vector<float> floats() const {
    std::vector<float> v(n_);
    to_float(t_, data(), v.data(), n_);
    return v;
  }

 private:
  DType t_;
  size_t n_, offset_;
  std::vector<std::byte> bytes_;
};

class EmuVsCpu : public ::testing::TestWithParam<DType> {
 protected:
  EmuVsCpu() : t_(GetParam()), cpu_(1, CpuBackend::kDefaultConvChunkBytes, false, GetParam()) {}

  // One rounding to the activation type, relative; float32 results reduce in another
  // order than the CPU's.
  double act_tol() const { return t_ == DType::kBF16 ? 1e-2 : t_ == DType::kF16 ? 2e-3 : 1e-5; }
  Acts acts(const std::vector<float>& v, size_t offset = 0) const { return Acts(t_, v, offset); }
  // v rounded to the activation type.
  std::vector<float> rounded(const std::vector<float>& v) const { return acts(v).floats(); }

  DType t_;
  CpuBackend cpu_;
};

// ---- The emulator itself: what it must catch. ----

// Thread i reads its neighbour's shared value without a barrier between the write and the
// read: the result depends on the order the threads run in.
void racy_kernel(int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

void synchronised_kernel(int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

void exits_before_barrier_kernel(int* out) {
  if (threadIdx.x == 3) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Lane i gets lane (i ^ 1)'s value, in each of two warps of two blocks.
void shuffle_kernel(int* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  out[i] = __shfl_xor_sync(0xffffffffu, i, 1);
}

TEST(Emulator, ARaceGivesDifferentResultsInTheTwoOrders) {
  std::vector<int> forward(64), reverse(64);
  emu::set_order(emu::Order::kForward);
  emu::launch(
      1, 64, 0, kStream, [](auto... a) { racy_kernel(a...); }, forward.data());
  emu::set_order(emu::Order::kReverse);
  emu::launch(
      1, 64, 0, kStream, [](auto... a) { racy_kernel(a...); }, reverse.data());
  emu::set_order(emu::Order::kForward);
  EXPECT_NE(forward, reverse);
  for (emu::Order o : {emu::Order::kForward, emu::Order::kReverse}) {
    emu::set_order(o);
    std::vector<int> out(64);
    emu::launch(
        1, 64, 0, kStream, [](auto... a) { synchronised_kernel(a...); }, out.data());
    for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i], (i + 1) % 64);
  }
  emu::set_order(emu::Order::kForward);
}

TEST(Emulator, FailsABarrierThatExitedThreadsMiss) {
  std::vector<int> out(32);
  EXPECT_THROW(
      emu::launch(
          1, 32, 0, kStream, [](auto... a) { exits_before_barrier_kernel(a...); }, out.data()),
      std::runtime_error);
}

void partial_shuffle_kernel(int* out) { out[threadIdx.x] = __shfl_xor_sync(0xffffu, 1, 1); }

TEST(Emulator, ShufflesWithinWarps) {
  std::vector<int> out(128, -1);
  // Thrown in a thread (a partial mask is not emulated): unwound on its fiber's stack.
  EXPECT_THROW(emu::launch(
                   1, 32, 0, kStream, [](auto... a) { partial_shuffle_kernel(a...); }, out.data()),
               std::logic_error);
  emu::launch(
      2, 64, 0, kStream, [](auto... a) { shuffle_kernel(a...); }, out.data());
  for (int i = 0; i < 128; ++i) ASSERT_EQ(out[i], i ^ 1);
}

TEST(Emulator, ReportsAnInvalidConfigurationAsCudaDoes) {
  std::vector<int> out(2048);
  emu::launch(
      1, 2048, 0, kStream, [](auto... a) { shuffle_kernel(a...); }, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  emu::launch(
      1, 2048, 0, kStream, [](auto... a) { shuffle_kernel(a...); }, out.data());
  EXPECT_THROW(kernels::check_launch("shuffle_kernel"), std::runtime_error);
}

// ---- kernels/ against the CPU backend. ----

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
  const int rows = 13, cols = 37, n = 3, c = 5, hw = 63;
  const std::vector<float> yf = random_vector(size_t(rows) * cols, 2),
                           img = random_vector(size_t(n) * c * hw, 3),
                           bias = random_vector(cols, 4), cbias = random_vector(c, 5);
  Acts convert_want(t_, v.size()), u8_want(t_, bytes.size()), f16_want(t_, halves.size());
  cpu_.convert(v.data(), convert_want.data(), v.size());
  cpu_.decode_input(bytes.data(), SampleType::kU8, bytes.size(), u8_want.data());
  cpu_.decode_input(halves.data(), SampleType::kF16, halves.size(), f16_want.data());
  Acts bias_want = acts(yf), cbias_want = acts(img);
  cpu_.add_bias(bias_want.data(), bias.data(), rows, cols);
  cpu_.add_channel_bias(cbias_want.data(), cbias.data(), n, c, hw);
  const auto got = both_orders([&] {
    Acts cv = Acts::nan(t_, v.size()), u8 = Acts::nan(t_, bytes.size()),
         f16 = Acts::nan(t_, halves.size()), y = acts(yf), im = acts(img);
    std::vector<float> back(v.size(), kNaN);
    kernels::convert(t_, v.data(), cv.data(), v.size(), kStream);
    kernels::convert_to_float(t_, cv.data(), back.data(), v.size(), kStream);
    kernels::decode_u8(t_, bytes.data(), bytes.size(), kU8Scale, u8.data(), kStream);
    kernels::decode_f16(t_, halves.data(), halves.size(), f16.data(), kStream);
    kernels::add_bias(t_, y.data(), bias.data(), rows, cols, kStream);
    kernels::add_channel_bias(t_, im.data(), cbias.data(), n, c, hw, kStream);
    return results(cv.floats(), back, u8.floats(), f16.floats(), y.floats(), im.floats());
  });
  expect_same(got[0], convert_want.floats(), "convert");
  expect_same(got[1], convert_want.floats(), "convert_to_float");
  expect_same(got[2], u8_want.floats(), "decode_u8");
  expect_same(got[3], f16_want.floats(), "decode_f16");
  expect_same(got[4], bias_want.floats(), "add_bias");
  expect_same(got[5], cbias_want.floats(), "add_channel_bias");
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

// Shuffles (warp arg-max and sums) and block sums; rows > warps, cols not a multiple of 32.
TEST_P(EmuVsCpu, SoftmaxCrossEntropy) {
  const int rows = 19, cols = 45;
  const Acts logits = acts(random_vector(size_t(rows) * cols, 5, 3.0));
  std::vector<int32_t> labels(rows);
  for (int r = 0; r < rows; ++r) labels[r] = (r * 7) % cols;
  Acts want_d(t_, size_t(rows) * cols);
  LossStats want;
  cpu_.softmax_xent(logits.data(), labels.data(), rows, cols, 0.5f, nullptr, want_d.data(), &want);
  const auto got = both_orders([&] {
    Acts d = Acts::nan(t_, size_t(rows) * cols);
    LossStats s;
    kernels::softmax_xent(t_, logits.data(), labels.data(), rows, cols, 0.5f, nullptr, d.data(), &s,
                          kStream);
    return results(d.floats(),
                   std::vector<float>{static_cast<float>(s.loss_sum), static_cast<float>(s.correct),
                                      static_cast<float>(s.count)});
  });
  expect_close(got[0], want_d.floats(), act_tol(), "dlogits");
  expect_close(got[1],
               {static_cast<float>(want.loss_sum), static_cast<float>(want.correct),
                static_cast<float>(want.count)},
               kSums, "loss, correct, count");
}

// Shared-memory tiles with partial edges.
TEST_P(EmuVsCpu, Transpose) {
  const int n = 2, a = 37, b = 70;
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

// Many ties (relu zeros and a coarse grid): the gradient must go to the first maximum, as
// on the CPU. Overlapping 3x3/2 windows, odd sizes, c = 3 (one-value path), 8, 16 and 64
// (ResNet's stem pool at 56x56).
TEST_P(EmuVsCpu, MaxPoolChannelsLast) {
  for (const Pool2dShape s :
       {Pool2dShape{2, 16, 9, 11, 3, 3, 2, 2, 1, 1}, Pool2dShape{2, 3, 7, 6, 2, 2, 2, 2, 0, 0},
        Pool2dShape{1, 8, 5, 5, 3, 3, 1, 1, 1, 1}, Pool2dShape{1, 64, 56, 56, 3, 3, 2, 2, 1, 1}}) {
    SCOPED_TRACE("c=" + std::to_string(s.c) + " " + std::to_string(s.h) + "x" +
                 std::to_string(s.w) + " k" + std::to_string(s.kh));
    const int in_cells = s.h * s.w, out_cells = s.out_h() * s.out_w();
    std::vector<float> xf = random_vector(size_t(s.n) * s.c * in_cells, 7);
    for (float& v : xf) v = std::max(0.0f, std::floor(v * 4.0f) / 8.0f);
    const size_t nx = xf.size(), ny = size_t(s.n) * s.c * out_cells;
    const std::vector<float> dyf = random_vector(ny, 8);
    const Acts x = acts(xf), dy = acts(dyf);
    Acts y(t_, ny), dx(t_, nx);
    cpu_.maxpool2d_forward(s, x.data(), y.data());
    cpu_.maxpool2d_backward(s, x.data(), y.data(), dy.data(), dx.data());
    const Acts hx = acts(to_nhwc(xf, s.n, s.c, in_cells));
    const Acts hdy = acts(to_nhwc(dyf, s.n, s.c, out_cells));
    const auto got = both_orders([&] {
      Acts hy = Acts::nan(t_, ny), hdx = Acts::nan(t_, nx);
      kernels::maxpool2d_nhwc_forward(t_, s, hx.data(), hy.data(), kStream);
      kernels::maxpool2d_nhwc_backward(t_, s, hx.data(), hy.data(), hdy.data(), hdx.data(),
                                       kStream);
      return results(hy.floats(), hdx.floats());
    });
    expect_same(got[0], to_nhwc(y.floats(), s.n, s.c, out_cells), "forward");
    expect_close(got[1], to_nhwc(dx.floats(), s.n, s.c, in_cells), 2 * act_tol(), "backward");
  }
}

// Average pooling in both layouts.
TEST_P(EmuVsCpu, AvgPool) {
  const Pool2dShape s{2, 5, 7, 9, 3, 3, 2, 2, 1, 1};
  const int in_cells = s.h * s.w, out_cells = s.out_h() * s.out_w();
  const size_t nx = size_t(s.n) * s.c * in_cells, ny = size_t(s.n) * s.c * out_cells;
  const std::vector<float> xf = random_vector(nx, 9), dyf = random_vector(ny, 10);
  const Acts x = acts(xf), dy = acts(dyf);
  Acts y(t_, ny), dx(t_, nx);
  cpu_.avgpool2d_forward(s, x.data(), y.data());
  cpu_.avgpool2d_backward(s, dy.data(), dx.data());
  for (const bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc ? "nhwc" : "nchw");
    const Acts hx = acts(nhwc ? to_nhwc(xf, s.n, s.c, in_cells) : xf);
    const Acts hdy = acts(nhwc ? to_nhwc(dyf, s.n, s.c, out_cells) : dyf);
    const auto got = both_orders([&] {
      Acts hy = Acts::nan(t_, ny), hdx = Acts::nan(t_, nx);
      kernels::avgpool2d_forward(t_, s, nhwc, hx.data(), hy.data(), kStream);
      kernels::avgpool2d_backward(t_, s, nhwc, hdy.data(), hdx.data(), kStream);
      return results(hy.floats(), hdx.floats());
    });
    const std::vector<float> wy = y.floats(), wdx = dx.floats();
    expect_close(got[0], nhwc ? to_nhwc(wy, s.n, s.c, out_cells) : wy, 2 * act_tol(), "forward");
    expect_close(got[1], nhwc ? to_nhwc(wdx, s.n, s.c, in_cells) : wdx, 2 * act_tol(), "backward");
  }
}

// Channels-last batch normalisation, alone and fused with the residual add and relu
// (kernels/batchnorm.cu): the fused calls against the separate kernels bit for bit, and
// against the CPU (NHWC [m, c] is NCHW with n = m, hw = 1). Cases: c = 64 and 16 (16-byte
// packs), 520 (several column blocks, the last partial), 6 and 3 (one value at a time in
// 16 bits), 4,000 rows (several row chunks merged), ResNet-34's layer2 and layer4 shapes
// at batch 2, one row, and buffers one value off a 16-byte boundary.
TEST_P(EmuVsCpu, BatchNormChannelsLast) {
  struct Case {
    int rows, c;
    size_t offset;
  };
  const float eps = 1e-5f, momentum = 0.1f;
  const size_t scratch_floats = size_t{1} << 21;
  std::vector<float> scratch(scratch_floats);
  for (const Case k :
       {Case{200, 64, 0}, Case{105, 6, 0}, Case{14, 3, 0}, Case{4000, 16, 0}, Case{100, 520, 0},
        Case{1568, 128, 0}, Case{98, 512, 0}, Case{1, 8, 0}, Case{200, 64, 1}}) {
    SCOPED_TRACE("rows=" + std::to_string(k.rows) + " c=" + std::to_string(k.c) +
                 " offset=" + std::to_string(k.offset));
    const int m = k.rows, c = k.c;
    const size_t count = size_t(m) * c;
    std::vector<float> xf = random_vector(count, 1, 2.0);
    // Channel means from -2 to 13, against a spread of 2: float32 results of the scale-and-
    // shift form lose about log2(|mean| / spread) bits to cancellation (the CPU's as well).
    for (size_t i = 0; i < count; ++i) xf[i] += static_cast<float>(i % c % 16) - 2.0f;
    const Acts x = acts(xf, k.offset), z = acts(random_vector(count, 2), k.offset),
               dy = acts(random_vector(count, 3), k.offset);
    const std::vector<float> gamma = random_vector(c, 4), beta = random_vector(c, 5);
    const std::vector<float> rm0(c, 0.1f), rv0(c, 1.5f);

    // CPU: training forward, evaluation forward (from its updated running statistics),
    // backward from the training forward's output.
    Acts cy(t_, count), cinf(t_, count), cdz(t_, count), cdx(t_, count);
    std::vector<float> crm = rm0, crv = rv0, cmean(c), cinv(c), cdg(c), cdb(c);
    cpu_.batchnorm_add_relu_forward(true, x.data(), z.data(), gamma.data(), beta.data(), cy.data(),
                                    m, c, 1, eps, momentum, crm.data(), crv.data(), cmean.data(),
                                    cinv.data());
    cpu_.batchnorm_add_relu_forward(false, x.data(), z.data(), gamma.data(), beta.data(),
                                    cinf.data(), m, c, 1, eps, momentum, crm.data(), crv.data(),
                                    nullptr, nullptr);
    cpu_.batchnorm_add_relu_backward(x.data(), cy.data(), dy.data(), cdz.data(), gamma.data(),
                                     cdx.data(), cdg.data(), cdb.data(), m, c, 1, eps, cmean.data(),
                                     cinv.data());

    // The kernels, fused and separate; the backward takes the CPU's y, so that both mask
    // the same cells.
    const auto got = both_orders([&] {
      auto fresh = [&] {
        std::fill(scratch.begin(), scratch.end(), kNaN);
        return scratch.data();
      };
      std::vector<std::vector<float>> out;
      // Training forward: fused, then separate (bn; add; relu) with its own statistics.
      Acts y = Acts::nan(t_, count, k.offset), sep = Acts::nan(t_, count, k.offset);
      std::vector<float> rm = rm0, rv = rv0, mean(c, kNaN), inv(c, kNaN);
      std::vector<float> rm1 = rm0, rv1 = rv0, mean1(c, kNaN), inv1(c, kNaN);
      kernels::batchnorm_nhwc_forward(t_, true, x.data(), z.data(), true, gamma.data(), beta.data(),
                                      y.data(), m, c, eps, momentum, rm.data(), rv.data(),
                                      mean.data(), inv.data(), fresh(), scratch_floats, kStream);
      kernels::batchnorm_nhwc_forward(t_, true, x.data(), nullptr, false, gamma.data(), beta.data(),
                                      sep.data(), m, c, eps, momentum, rm1.data(), rv1.data(),
                                      mean1.data(), inv1.data(), fresh(), scratch_floats, kStream);
      kernels::add(t_, sep.data(), z.data(), sep.data(), count, kStream);
      kernels::relu_forward(t_, sep.data(), sep.data(), count, kStream);
      out.insert(out.end(), {y.floats(), sep.floats(), mean, mean1, inv, inv1, rm, rm1, rv, rv1});
      // Without z.
      Acts y2 = Acts::nan(t_, count, k.offset), sep2 = Acts::nan(t_, count, k.offset);
      std::vector<float> rm2 = rm0, rv2 = rv0, mean2(c), inv2(c);
      kernels::batchnorm_nhwc_forward(t_, true, x.data(), nullptr, true, gamma.data(), beta.data(),
                                      y2.data(), m, c, eps, momentum, rm2.data(), rv2.data(),
                                      mean2.data(), inv2.data(), fresh(), scratch_floats, kStream);
      kernels::batchnorm_nhwc_forward(t_, true, x.data(), nullptr, false, gamma.data(), beta.data(),
                                      sep2.data(), m, c, eps, momentum, rm2.data(), rv2.data(),
                                      mean2.data(), inv2.data(), fresh(), scratch_floats, kStream);
      kernels::relu_forward(t_, sep2.data(), sep2.data(), count, kStream);
      out.insert(out.end(), {y2.floats(), sep2.floats()});
      // Evaluation from the CPU's running statistics: fused and separate.
      Acts e = Acts::nan(t_, count, k.offset), esep = Acts::nan(t_, count, k.offset);
      std::vector<float> erm = crm, erv = crv;
      kernels::batchnorm_nhwc_forward(
          t_, false, x.data(), z.data(), true, gamma.data(), beta.data(), e.data(), m, c, eps,
          momentum, erm.data(), erv.data(), nullptr, nullptr, fresh(), scratch_floats, kStream);
      kernels::batchnorm_nhwc_forward(
          t_, false, x.data(), nullptr, false, gamma.data(), beta.data(), esep.data(), m, c, eps,
          0.0f, erm.data(), erv.data(), nullptr, nullptr, fresh(), scratch_floats, kStream);
      kernels::add(t_, esep.data(), z.data(), esep.data(), count, kStream);
      kernels::relu_forward(t_, esep.data(), esep.data(), count, kStream);
      out.insert(out.end(), {e.floats(), esep.floats(), erm, erv});
      // Backward from the CPU's y with the CPU's statistics: fused (dz written), separate
      // (relu_backward, then batch-norm backward of g), and fused with dz over dy and no dx.
      const Acts ya = acts(cy.floats(), k.offset);
      Acts dz = Acts::nan(t_, count, k.offset), dx = Acts::nan(t_, count, k.offset);
      Acts g = Acts::nan(t_, count, k.offset), sdx = Acts::nan(t_, count, k.offset);
      std::vector<float> dg(c, kNaN), db(c, kNaN), sdg(c, kNaN), sdb(c, kNaN);
      kernels::batchnorm_nhwc_backward(t_, x.data(), ya.data(), dy.data(), dz.data(), gamma.data(),
                                       dx.data(), dg.data(), db.data(), m, c, cmean.data(),
                                       cinv.data(), fresh(), scratch_floats, kStream);
      kernels::relu_backward(t_, ya.data(), dy.data(), g.data(), count, kStream);
      kernels::batchnorm_nhwc_backward(t_, x.data(), nullptr, g.data(), nullptr, gamma.data(),
                                       sdx.data(), sdg.data(), sdb.data(), m, c, cmean.data(),
                                       cinv.data(), fresh(), scratch_floats, kStream);
      Acts dy_copy = acts(dy.floats(), k.offset);
      std::vector<float> dg3(c, kNaN), db3(c, kNaN);
      kernels::batchnorm_nhwc_backward(t_, x.data(), ya.data(), dy_copy.data(), dy_copy.data(),
                                       gamma.data(), nullptr, dg3.data(), db3.data(), m, c,
                                       cmean.data(), cinv.data(), fresh(), scratch_floats, kStream);
      out.insert(out.end(), {dz.floats(), g.floats(), dx.floats(), sdx.floats(), dg, sdg, db, sdb,
                             dy_copy.floats(), dg3, db3});
      return out;
    });
    enum {
      kY,
      kSep,
      kMean,
      kMean1,
      kInv,
      kInv1,
      kRm,
      kRm1,
      kRv,
      kRv1,
      kY2,
      kSep2,
      kEval,
      kEvalSep,
      kErm,
      kErv,
      kDz,
      kG,
      kDx,
      kSdx,
      kDg,
      kSdg,
      kDb,
      kSdb,
      kDyCopy,
      kDg3,
      kDb3
    };
    // Fused against separate, bit for bit.
    expect_same(got[kY], got[kSep], "fused forward");
    for (int i : {kMean, kInv, kRm, kRv}) expect_same(got[i], got[i + 1], "fused statistics");
    expect_same(got[kY2], got[kSep2], "fused forward without z");
    expect_same(got[kEval], got[kEvalSep], "fused evaluation");
    expect_same(got[kErm], crm, "evaluation leaves the running mean");
    expect_same(got[kErv], crv, "evaluation leaves the running variance");
    expect_same(got[kDz], got[kG], "fused dz");
    expect_same(got[kDx], got[kSdx], "fused dx");
    expect_same(got[kDg], got[kSdg], "fused dgamma");
    expect_same(got[kDb], got[kSdb], "fused dbeta");
    expect_same(got[kDyCopy], got[kDz], "dz over dy");
    expect_same(got[kDg3], got[kDg], "dgamma without dx");
    expect_same(got[kDb3], got[kDb], "dbeta without dx");
    // Against the CPU.
    expect_close(got[kY], cy.floats(), act_tol(), "forward");
    expect_close(got[kMean], cmean, kSums, "saved mean");
    expect_close(got[kInv], cinv, kSums, "saved 1/std");
    expect_close(got[kRm], crm, kSums, "running mean");
    expect_close(got[kRv], crv, kSums, "running variance");
    expect_close(got[kEval], cinf.floats(), act_tol(), "evaluation");
    expect_same(got[kDz], cdz.floats(), "dz");
    expect_close(got[kDx], cdx.floats(), 2 * act_tol(), "dx");
    expect_close(got[kDg], cdg, kSums, "dgamma");
    expect_close(got[kDb], cdb, kSums, "dbeta");
  }
}

INSTANTIATE_TEST_SUITE_P(Act, EmuVsCpu, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         type_name);

}  // namespace
}  // namespace hpctrain
