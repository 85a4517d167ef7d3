// The CUDA backend against the CPU backend on random inputs, operation by operation at
// odd sizes in float32: matrix products, element-wise operations, optimizers, the loss,
// pooling, convolution, batch normalisation, the embedding, channels-last copies, input
// decoding and upload, the phase clock, one-rank collectives, and TF32 rounding (tests/gpu/
// test_cuda_mixed.cpp checks the operations in 16 bits, test_cuda_models.cpp whole models).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"
#include "common/compare.hpp"
#include "core/convert.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "core/sample_type.hpp"
#include "cuda_vs_cpu.hpp"
#include "unit/gradient_check.hpp"

namespace hpctrain {
namespace {

using gradcheck::expect_close;
using gradcheck::random_vector;
using test::CudaVsCpu;
using test::kElementwise;
using test::kSums;
using test::relative_error;

TEST_F(CudaVsCpu, GemmAllTransposes) {
  const int m = 37, n = 29, k = 53;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    auto a = random_vector(m * k, 1 + t), b = random_vector(k * n, 5 + t),
         c = random_vector(m * n, 9);
    std::vector<float> want = c;
    cpu_.gemm(ta, tb, m, n, k, 0.7f, a.data(), b.data(), 0.3f, want.data());
    float* dc = up(c);
    gpu_->gemm(ta, tb, m, n, k, 0.7f, up(a), up(b), 0.3f, dc);
    expect_close(down(dc, c.size()), want, kSums, "gemm");
  }
}

TEST_F(CudaVsCpu, BiasAndElementwise) {
  const int rows = 13, cols = 37, n = 3, c = 5, hw = 7 * 9;
  auto y = random_vector(rows * cols, 1), bias = random_vector(cols, 2);
  std::vector<float> want = y;
  cpu_.add_bias(want.data(), bias.data(), rows, cols);
  float* dy = up(y);
  gpu_->add_bias(dy, up(bias), rows, cols);
  expect_close(down(dy, y.size()), want, kElementwise, "add_bias");

  std::vector<float> sums(cols);
  cpu_.sum_rows(y.data(), sums.data(), rows, cols);
  float* ds = up(std::vector<float>(cols));
  gpu_->sum_rows(up(y), ds, rows, cols);
  expect_close(down(ds, cols), sums, kSums, "sum_rows");
  // Tall, as a channels-last convolution's bias gradient: rows of samples x positions.
  const int tall = 3001;
  auto t = random_vector(tall * cols, 7);
  cpu_.sum_rows(t.data(), sums.data(), tall, cols);
  gpu_->sum_rows(up(t), ds, tall, cols);
  expect_close(down(ds, cols), sums, kSums, "sum_rows, tall");

  auto img = random_vector(n * c * hw, 3), cb = random_vector(c, 4);
  want = img;
  cpu_.add_channel_bias(want.data(), cb.data(), n, c, hw);
  float* dimg = up(img);
  gpu_->add_channel_bias(dimg, up(cb), n, c, hw);
  expect_close(down(dimg, img.size()), want, kElementwise, "add_channel_bias");
  std::vector<float> csum(c);
  cpu_.sum_channels(img.data(), csum.data(), n, c, hw);
  float* dcs = up(std::vector<float>(c));
  gpu_->sum_channels(up(img), dcs, n, c, hw);
  expect_close(down(dcs, c), csum, kSums, "sum_channels");

  auto a = random_vector(1001, 5), b = random_vector(1001, 6);
  std::vector<float> out(a.size());
  float* dout = up(out);
  cpu_.add(a.data(), b.data(), out.data(), a.size());
  gpu_->add(up(a), up(b), dout, a.size());
  expect_close(down(dout, a.size()), out, kElementwise, "add");
  cpu_.multiply(a.data(), b.data(), out.data(), a.size());
  gpu_->multiply(up(a), up(b), dout, a.size());
  expect_close(down(dout, a.size()), out, kElementwise, "multiply");
  cpu_.relu_forward(a.data(), out.data(), a.size());
  gpu_->relu_forward(up(a), dout, a.size());
  expect_close(down(dout, a.size()), out, kElementwise, "relu_forward");
  const std::vector<float> relu_y = out;
  cpu_.relu_backward(relu_y.data(), b.data(), out.data(), a.size());
  gpu_->relu_backward(up(relu_y), up(b), dout, a.size());
  expect_close(down(dout, a.size()), out, kElementwise, "relu_backward");
  out = a;
  cpu_.scale(out.data(), out.size(), -0.37f);
  float* da = up(a);
  gpu_->scale(da, a.size(), -0.37f);
  expect_close(down(da, a.size()), out, kElementwise, "scale");
  // Dropout draws the same mask on both backends (counter-based).
  std::vector<float> mask(a.size()), dmask_host;
  cpu_.dropout_forward(a.data(), out.data(), mask.data(), a.size(), 0.3f, 77);
  float* dmask = up(mask);
  gpu_->dropout_forward(up(a), dout, dmask, a.size(), 0.3f, 77);
  EXPECT_EQ(down(dmask, a.size()), mask);
  expect_close(down(dout, a.size()), out, kElementwise, "dropout");
}

TEST_F(CudaVsCpu, SgdVariants) {
  const size_t n = 4099;
  for (int v = 0; v < 3; ++v) {
    SgdParams sgd{0.05f, v == 0 ? 0.0f : 0.9f, 1e-4f, v == 2};
    auto p = random_vector(n, 1), g = random_vector(n, 2), vel = random_vector(n, 3);
    std::vector<float> wp = p, wv = vel;
    cpu_.sgd_update(wp.data(), g.data(), wv.data(), n, sgd, nullptr);
    float *dp = up(p), *dv = up(vel);
    gpu_->sgd_update(dp, up(g), dv, n, sgd, nullptr);
    expect_close(down(dp, n), wp, kElementwise, "sgd params");
    expect_close(down(dv, n), wv, kElementwise, "sgd velocity");
  }
}

// Gradients summed over micro-batches, then scaled: as the CPU, bit for bit.
TEST_F(CudaVsCpu, AccumulateAndScale) {
  const size_t n = 4099;
  auto a = random_vector(n, 1), b = random_vector(n, 2);
  std::vector<float> want = a;
  cpu_.accumulate(want.data(), b.data(), n);
  cpu_.scale(want.data(), n, 0.25f);
  float* d = up(a);
  gpu_->accumulate(d, up(b), n);
  gpu_->scale(d, n, 0.25f);
  expect_close(down(d, n), want, 0.0, "accumulate, then scale");
}

// Adam and AdamW from a mid-run state: the step counter advances on the device, then the
// update reads it there.
TEST_F(CudaVsCpu, AdamVariants) {
  const size_t n = 4099;
  for (const bool decoupled : {false, true}) {
    AdamParams adam;
    adam.lr = 1e-3f;
    adam.weight_decay = 0.01f;
    adam.decoupled = decoupled;
    auto p = random_vector(n, 1), g = random_vector(n, 2), m = random_vector(n, 3),
         v = random_vector(n, 4);
    for (float& x : v) x = x * x;
    std::vector<float> wp = p, wm = m, wv = v, step = {4.0f};
    cpu_.count_step(step.data(), nullptr);
    cpu_.adam_update(wp.data(), g.data(), wm.data(), wv.data(), n, adam, step.data(), nullptr);
    float *dp = up(p), *dm = up(m), *dv = up(v), *dstep = up(std::vector<float>{4.0f});
    gpu_->count_step(dstep, nullptr);
    gpu_->adam_update(dp, up(g), dm, dv, n, adam, dstep, nullptr);
    EXPECT_EQ(down(dstep, 1), step);
    expect_close(down(dp, n), wp, kElementwise, "adam params");
    expect_close(down(dm, n), wm, kElementwise, "adam first moment");
    expect_close(down(dv, n), wv, kElementwise, "adam second moment");
  }
}

TEST_F(CudaVsCpu, SoftmaxCrossEntropy) {
  const int rows = 67, cols = 45;
  auto logits = random_vector(rows * cols, 1, 3.0);
  std::vector<int32_t> labels(rows);
  for (int r = 0; r < rows; ++r) labels[r] = (r * 7) % cols;
  std::vector<float> d(logits.size());
  LossStats want;
  cpu_.softmax_xent(logits.data(), labels.data(), rows, cols, 0.5f, nullptr, d.data(), &want);
  DeviceArray<int32_t> dl(*gpu_, rows);
  gpu_->copy_to_device(dl.data(), labels.data(), rows * sizeof(int32_t));
  DeviceArray<LossStats> ds(*gpu_, 1);
  float* dd = up(d);
  gpu_->softmax_xent(up(logits), dl.data(), rows, cols, 0.5f, nullptr, dd, ds.data());
  LossStats got;
  gpu_->copy_to_host(&got, ds.data(), sizeof(got));
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-9 * std::fabs(want.loss_sum));
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_EQ(got.count, want.count);
  expect_close(down(dd, d.size()), d, kElementwise, "dlogits");
}

TEST_F(CudaVsCpu, Pooling) {
  for (const Pool2dShape s :
       {Pool2dShape{3, 4, 9, 7, 3, 3, 2, 2, 1, 1}, Pool2dShape{2, 3, 8, 10, 2, 2, 2, 2, 0, 0}}) {
    auto x = random_vector(static_cast<size_t>(s.n) * s.c * s.h * s.w, 1);
    const size_t ny = static_cast<size_t>(s.n) * s.c * s.out_h() * s.out_w();
    auto dy = random_vector(ny, 2);
    std::vector<float> y(ny), dx(x.size());
    float *gx = up(x), *gy = up(y), *gdx = up(dx), *gdy = up(dy);
    cpu_.maxpool2d_forward(s, x.data(), y.data());
    gpu_->maxpool2d_forward(s, gx, gy);
    expect_close(down(gy, ny), y, kElementwise, "maxpool forward");
    cpu_.maxpool2d_backward(s, x.data(), y.data(), dy.data(), dx.data());
    gpu_->maxpool2d_backward(s, gx, gy, gdy, gdx);
    expect_close(down(gdx, dx.size()), dx, kElementwise, "maxpool backward");
    cpu_.avgpool2d_forward(s, x.data(), y.data());
    gpu_->avgpool2d_forward(s, gx, gy);
    expect_close(down(gy, ny), y, kElementwise, "avgpool forward");
    cpu_.avgpool2d_backward(s, dy.data(), dx.data());
    gpu_->avgpool2d_backward(s, gdy, gdx);
    expect_close(down(gdx, dx.size()), dx, kElementwise, "avgpool backward");
  }
}

TEST_F(CudaVsCpu, Convolution) {
  const Conv2dShape s{3, 5, 11, 9, 7, 3, 3, 2, 2, 1, 1};
  auto x = random_vector(static_cast<size_t>(s.n) * s.c_in * s.h * s.w, 1);
  auto w = random_vector(static_cast<size_t>(s.c_out) * s.patch(), 2, 0.3);
  const size_t ny = static_cast<size_t>(s.n) * s.c_out * s.out_h() * s.out_w();
  auto dy = random_vector(ny, 3);
  std::vector<float> y(ny), dx(x.size()), dw(w.size());
  std::vector<float> cpu_ws(cpu_.conv2d_workspace_bytes(s) / sizeof(float) + 1);
  DeviceArray<std::byte> gws(*gpu_, gpu_->conv2d_workspace_bytes(s));
  float *gx = up(x), *gw = up(w), *gy = up(y), *gdx = up(dx), *gdw = up(dw), *gdy = up(dy);
  cpu_.conv2d_forward(s, x.data(), w.data(), y.data(), cpu_ws.data());
  gpu_->conv2d_forward(s, gx, gw, gy, gws.data());
  expect_close(down(gy, ny), y, kSums, "conv forward");
  cpu_.conv2d_backward_data(s, dy.data(), w.data(), dx.data(), cpu_ws.data(), false);
  gpu_->conv2d_backward_data(s, gdy, gw, gdx, gws.data(), false);
  expect_close(down(gdx, dx.size()), dx, kSums, "conv backward data");
  cpu_.conv2d_backward_data(s, dy.data(), w.data(), dx.data(), cpu_ws.data(), true);
  gpu_->conv2d_backward_data(s, gdy, gw, gdx, gws.data(), true);
  expect_close(down(gdx, dx.size()), dx, kSums, "conv backward data, accumulated");
  cpu_.conv2d_backward_filter(s, x.data(), dy.data(), dw.data(), cpu_ws.data());
  gpu_->conv2d_backward_filter(s, gx, gdy, gdw, gws.data());
  expect_close(down(gdw, dw.size()), dw, kSums, "conv backward filter");
}

TEST_F(CudaVsCpu, BatchNormalisation) {
  const int n = 4, c = 6, hw = 5 * 7;
  auto x = random_vector(n * c * hw, 1, 2.0), dy = random_vector(n * c * hw, 2);
  auto gamma = random_vector(c, 3), beta = random_vector(c, 4);
  std::vector<float> rm(c, 0.1f), rv(c, 1.5f), y(x.size()), mean(c), inv(c);
  float *gx = up(x), *gg = up(gamma), *gb = up(beta), *grm = up(rm), *grv = up(rv), *gy = up(y),
        *gmean = up(mean), *ginv = up(inv);
  cpu_.batchnorm_forward_training(x.data(), gamma.data(), beta.data(), y.data(), n, c, hw, 1e-5f,
                                  0.1f, rm.data(), rv.data(), mean.data(), inv.data());
  gpu_->batchnorm_forward_training(gx, gg, gb, gy, n, c, hw, 1e-5f, 0.1f, grm, grv, gmean, ginv);
  expect_close(down(gy, y.size()), y, kSums, "bn forward");
  expect_close(down(grm, c), rm, kSums, "bn running mean");
  expect_close(down(grv, c), rv, kSums, "bn running variance");
  expect_close(down(gmean, c), mean, kSums, "bn saved mean");
  expect_close(down(ginv, c), inv, kSums, "bn saved 1/std");
  std::vector<float> dx(x.size()), dgamma(c), dbeta(c);
  float *gdx = up(dx), *gdg = up(dgamma), *gdb = up(dbeta);
  cpu_.batchnorm_backward(x.data(), dy.data(), gamma.data(), dx.data(), dgamma.data(), dbeta.data(),
                          n, c, hw, 1e-5f, mean.data(), inv.data());
  gpu_->batchnorm_backward(gx, up(dy), gg, gdx, gdg, gdb, n, c, hw, 1e-5f, gmean, ginv);
  expect_close(down(gdx, dx.size()), dx, kSums, "bn dx");
  expect_close(down(gdg, c), dgamma, kSums, "bn dgamma");
  expect_close(down(gdb, c), dbeta, kSums, "bn dbeta");
  gpu_->batchnorm_backward(gx, up(dy), gg, nullptr, gdg, gdb, n, c, hw, 1e-5f, gmean, ginv);
  expect_close(down(gdg, c), dgamma, kSums, "bn dgamma without dx");
  expect_close(down(gdb, c), dbeta, kSums, "bn dbeta without dx");
  cpu_.batchnorm_forward_inference(x.data(), gamma.data(), beta.data(), y.data(), n, c, hw, 1e-5f,
                                   rm.data(), rv.data());
  gpu_->batchnorm_forward_inference(gx, gg, gb, gy, n, c, hw, 1e-5f, up(rm), up(rv));
  expect_close(down(gy, y.size()), y, kSums, "bn inference");
}

void transpose_and_filter_copy(Backend* gpu, int n, int a, int b) {
  SCOPED_TRACE("n=" + std::to_string(n) + " a=" + std::to_string(a) + " b=" + std::to_string(b));
  const size_t count = static_cast<size_t>(n) * a * b;
  const std::vector<float> x = random_vector(count, 21);
  std::vector<uint16_t> x16(count);
  from_float(DType::kBF16, x.data(), x16.data(), count);
  DeviceArray<uint16_t> gx(*gpu, count), gy(*gpu, count);
  DeviceArray<float> gf(*gpu, count);
  gpu->copy_to_device(gx.data(), x16.data(), count * 2);
  gpu->transpose(gx.data(), gy.data(), n, a, b);
  std::vector<uint16_t> y16(count);
  gpu->copy_to_host(y16.data(), gy.data(), count * 2);
  gpu->copy_to_device(gf.data(), x.data(), count * sizeof(float));
  gpu->convert_filter(gf.data(), gy.data(), n, a, b);
  std::vector<uint16_t> f16(count);
  gpu->copy_to_host(f16.data(), gy.data(), count * 2);
  size_t wrong = 0, wrong_filter = 0;
  for (int z = 0; z < n; ++z) {
    for (int i = 0; i < a; ++i) {
      for (int j = 0; j < b; ++j) {
        const size_t zz = static_cast<size_t>(z);
        const size_t src = (zz * a + i) * b + j, dst = (zz * b + j) * a + i;
        wrong += y16[dst] != x16[src];
        wrong_filter += f16[dst] != x16[src];
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(wrong_filter, 0u);
}

// transpose moves 16-bit values exactly; convert_filter is KCRS -> KRSC rounded. a = 37: not
// a multiple of the 32x32 tile; 3 and 1: an image's channels, 9: a 3x3 filter's positions
// (the kernel for few rows); 70 rows of 9: the kernel for few columns.
TEST(CudaChannelsLast, TransposeAndFilterCopy) {
  CudaBackendOptions o;
  o.act_type = DType::kBF16;
  o.channels_last = true;
  const std::unique_ptr<Backend> gpu = make_cuda_backend(o);
  for (const int a : {37, 3, 1, 9}) transpose_and_filter_copy(gpu.get(), 3, a, 70);
  transpose_and_filter_copy(gpu.get(), 3, 70, 9);  // few columns
}

// Stored input decoded on the GPU: bit for bit the CPU backend's (the host's
// decode_samples), for every uint8 and every float16 bit pattern, also normalised (a NaN
// only has to stay a NaN).
TEST_F(CudaVsCpu, DecodeInputMatchesTheHostBitForBit) {
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<uint8_t> bytes(256 * 3 + 1);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  auto floats = random_vector(1001, 3);
  struct Case {
    SampleType type;
    const void* data;
    size_t n;
  };
  for (const Case& c : {Case{SampleType::kU8, bytes.data(), bytes.size()},
                        Case{SampleType::kF16, halves.data(), halves.size()},
                        Case{SampleType::kF32, floats.data(), floats.size()}}) {
    DeviceArray<uint8_t> raw(*gpu_, c.n * sample_type_size(c.type));
    gpu_->copy_to_device(raw.data(), c.data, c.n * sample_type_size(c.type));
    DeviceArray<float> out(*gpu_, c.n);
    // As stored, then normalised as decoded (3 channels of 11 values per sample).
    const std::vector<float> mean = {0.25f, 0.5f, 0.125f}, inv_std = {3.0f, 1.0f / 0.3f, 7.5f};
    for (const bool normalised : {false, true}) {
      const InputNorm host =
          normalised ? InputNorm{mean.data(), inv_std.data(), 3, 11} : InputNorm{};
      const InputNorm device = normalised ? InputNorm{up(mean), up(inv_std), 3, 11} : InputNorm{};
      std::vector<float> want(c.n);
      cpu_.decode_input(c.data, c.type, c.n, host, want.data());
      gpu_->decode_input(raw.data(), c.type, c.n, device, out.data());
      const std::vector<float> got = down(out.data(), c.n);
      const std::string what = std::string(to_string(c.type)) + (normalised ? " normalised" : "");
      for (size_t i = 0; i < c.n; ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << what << "[" << i << "]";
        } else {
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << what << "[" << i << "]";
        }
      }
    }
  }
}

// Step graphs: recording runs nothing, each replay runs what was recorded, in order with
// eager work; an operation that waits for the device fails the recording, which is then
// dropped, and the backend works on.
TEST_F(CudaVsCpu, StepGraphReplaysWhatItRecorded) {
  if (!gpu_->can_capture()) GTEST_SKIP() << "no graphs with HPCTRAIN_CUDA_SYNC=1";
  // A recording left open by a failed expectation would break the tests after this one.
  struct CloseCapture {
    Backend& b;
    ~CloseCapture() { b.abort_capture(); }
  } close{*gpu_};
  const std::vector<float> x0 = {1, -2, 3.5f, 0.25f, 8};
  float* x = up(x0);
  float* sum = up(std::vector<float>(x0.size(), 0.0f));
  gpu_->begin_capture();
  gpu_->scale(x, x0.size(), 2.0f);
  gpu_->accumulate(sum, x, x0.size());
  const int id = gpu_->end_capture();
  EXPECT_EQ(down(x, x0.size()), x0);  // nothing ran yet
  gpu_->replay(id);
  gpu_->scale(x, x0.size(), -1.0f);  // eager, between the replays
  gpu_->replay(id);
  const std::vector<float> got = down(x, x0.size()), sums = down(sum, x0.size());
  for (size_t i = 0; i < x0.size(); ++i) {
    EXPECT_EQ(got[i], -4 * x0[i]);
    EXPECT_EQ(sums[i], 2 * x0[i] - 4 * x0[i]);
  }
  gpu_->begin_capture();
  EXPECT_THROW(gpu_->synchronize(), Error);
  gpu_->abort_capture();
  gpu_->scale(x, x0.size(), 0.5f);
  EXPECT_EQ(down(x, x0.size())[0], -2 * x0[0]);
  gpu_->drop_graphs();
}

// Embedding lookup and its gradient: forward copies rows, backward sums repeated ids' rows
// in row order on both backends, so both agree bit for bit (also on an id repeated in
// several samples and rows that no id picks).
TEST_F(CudaVsCpu, EmbeddingForwardAndBackwardBitForBit) {
  const int vocab = 13, dim = 70, rows = 5 * 17;
  std::vector<float> ids(rows);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>((i * 7 + i / 5) % 11);
  ids[3] = ids[40] = ids[84] = 4;
  const std::vector<float> table = random_vector(size_t(vocab) * dim, 5);
  const std::vector<float> dy = random_vector(size_t(rows) * dim, 6);
  std::vector<float> y(dy.size()), dtable(table.size());
  cpu_.embedding_forward(ids.data(), table.data(), y.data(), rows, vocab, dim);
  cpu_.embedding_backward(ids.data(), dy.data(), dtable.data(), rows, vocab, dim);
  float* gids = up(ids);
  float* gy = up(std::vector<float>(y.size(), -1.0f));
  float* gdt = up(std::vector<float>(dtable.size(), -1.0f));  // overwritten, zeros too
  gpu_->embedding_forward(gids, up(table), gy, rows, vocab, dim);
  gpu_->embedding_backward(gids, up(dy), gdt, rows, vocab, dim);
  test::expect_same(down(gy, y.size()), y, "embedding forward");
  test::expect_same(down(gdt, dtable.size()), dtable, "embedding backward");
}

// Uploads through both input slots from pinned memory: each batch arrives intact, also
// when the host rewrites its buffer right after wait_uploads().
TEST_F(CudaVsCpu, InputUploadsThroughTwoSlots) {
  const size_t n = 3 * 1000 + 7;
  std::vector<float> host(n);
  gpu_->pin_host(host.data(), n * sizeof(float));
  DeviceArray<float> slot[2] = {DeviceArray<float>(*gpu_, n), DeviceArray<float>(*gpu_, n)};
  DeviceArray<float> sum(*gpu_, n);
  std::vector<float> want(n, 0.0f);
  for (int batch = 0; batch < 6; ++batch) {
    for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(batch * 10000 + i);
    for (size_t i = 0; i < n; ++i) want[i] += host[i];
    const int s = batch % 2;
    gpu_->upload(s, slot[s].data(), host.data(), n * sizeof(float));
    gpu_->uploads_ready();
    gpu_->add(sum.data(), slot[s].data(), sum.data(), n);  // the computation reads the slot
    gpu_->input_consumed(s);
    gpu_->wait_uploads();
    std::fill(host.begin(), host.end(), -1.0f);  // the host reuses its buffer at once
  }
  expect_close(down(sum.data(), n), want, kElementwise, "sum of uploaded batches");
  gpu_->unpin_host(host.data());
}

// The device phase clock: every phase is timed, the long one longest, and take_phases()
// starts new sums.
TEST_F(CudaVsCpu, PhaseClockTimesStreamOrder) {
  const int m = 1024;
  auto a = random_vector(size_t(m) * m, 1);
  float *da = up(a), *dc = up(std::vector<float>(size_t(m) * m));
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < kPhaseMarks; ++i) {
      gpu_->phase_mark(i);
      if (i == 1) {
        for (int r = 0; r < 20; ++r) gpu_->gemm(false, false, m, m, m, 1.0f, da, da, 0.0f, dc);
      }
    }
  }
  const PhaseSeconds p = gpu_->take_phases();
  for (int i = 0; i < kPhaseMarks; ++i) EXPECT_GT(p[i], 0.0) << "phase " << i;
  EXPECT_GT(p[1], 10 * p[0]) << "the GEMMs run between marks 1 and 2";
  const PhaseSeconds again = gpu_->take_phases();
  for (double v : again) EXPECT_EQ(v, 0.0);
}

// Asynchronous collectives on a one-rank NCCL communicator (the sum is the identity, so
// this checks the calls and their streams run, not the ordering across ranks).
TEST_F(CudaVsCpu, AsyncCollectivesRunOnOneRank) {
  if (!gpu_->has_device_collectives()) GTEST_SKIP() << "built without NCCL";
  gpu_->join_collectives(gpu_->new_collective_id(), 0, 1);
  const size_t n = (size_t{1} << 20) + 3;
  auto a = random_vector(n, 1);
  float* d = up(a);
  for (int round = 0; round < 3; ++round) {
    gpu_->scale(d, n, 2.0f);  // before the collective: it must see this
    gpu_->allreduce_sum_async(d, n / 2);
    gpu_->allreduce_sum_async(d + n / 2, n - n / 2);
    gpu_->wait_collectives();
    gpu_->scale(d, n, 0.5f);  // after the wait
  }
  expect_close(down(d, n), a, kElementwise, "async all-reduce");
}

// Device memory running out is std::bad_alloc, as on the CPU backend (a model's builder
// turns it into exit 2 naming the buffer), and leaves no error behind for the next call.
TEST_F(CudaVsCpu, OutOfDeviceMemoryIsBadAlloc) {
  EXPECT_THROW(gpu_->alloc_bytes(size_t{1} << 50), std::bad_alloc);  // 1 PiB
  const auto a = random_vector(1000, 2);
  expect_close(down(up(a), a.size()), a, 0.0, "an allocation after running out");
}

// precision tf32: matrix products and convolutions within TF32's rounding of the CPU's
// float32 result (operands rounded to a 10-bit mantissa: about 3e-4 relative).
TEST(CudaTf32, GemmAndConvolutionWithinTf32Rounding) {
  CudaBackendOptions o;
  o.tf32 = true;
  auto gpu = make_cuda_backend(o);
  CpuBackend cpu(1);
  const int m = 256, n = 192, k = 512;
  auto a = random_vector(size_t(m) * k, 1), b = random_vector(size_t(k) * n, 2);
  std::vector<float> want(size_t(m) * n), got(want.size());
  cpu.gemm(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, want.data());
  DeviceArray<float> ga(*gpu, a.size()), gb(*gpu, b.size()), gc(*gpu, want.size());
  gpu->copy_to_device(ga.data(), a.data(), a.size() * sizeof(float));
  gpu->copy_to_device(gb.data(), b.data(), b.size() * sizeof(float));
  gpu->gemm(false, false, m, n, k, 1.0f, ga.data(), gb.data(), 0.0f, gc.data());
  gpu->copy_to_host(got.data(), gc.data(), got.size() * sizeof(float));
  const double gemm_error = relative_error(got, want);
  std::printf("tf32 gemm: relative error %.2e\n", gemm_error);
  EXPECT_LT(gemm_error, 2e-3);

  Conv2dShape s;
  s.n = 4, s.c_in = 16, s.h = 15, s.w = 17, s.c_out = 32, s.kh = s.kw = 3;
  s.stride_h = s.stride_w = 1, s.pad_h = s.pad_w = 1;
  auto x = random_vector(size_t(s.n) * s.c_in * s.h * s.w, 3);
  auto w = random_vector(size_t(s.c_out) * s.c_in * s.kh * s.kw, 4);
  std::vector<float> y(size_t(s.n) * s.c_out * s.out_h() * s.out_w()), gy_host(y.size());
  std::vector<float> cpu_ws(cpu.conv2d_workspace_bytes(s) / sizeof(float) + 1);
  cpu.conv2d_forward(s, x.data(), w.data(), y.data(), cpu_ws.data());
  DeviceArray<float> gx(*gpu, x.size()), gw(*gpu, w.size()), gy(*gpu, y.size());
  DeviceArray<std::byte> ws(*gpu, gpu->conv2d_workspace_bytes(s) + 1);
  gpu->copy_to_device(gx.data(), x.data(), x.size() * sizeof(float));
  gpu->copy_to_device(gw.data(), w.data(), w.size() * sizeof(float));
  gpu->conv2d_forward(s, gx.data(), gw.data(), gy.data(), ws.data());
  gpu->copy_to_host(gy_host.data(), gy.data(), y.size() * sizeof(float));
  const double conv_error = relative_error(gy_host, y);
  std::printf("tf32 convolution: relative error %.2e\n", conv_error);
  EXPECT_LT(conv_error, 2e-3);
}

}  // namespace
}  // namespace hpctrain
