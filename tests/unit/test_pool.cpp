// Pooling on the CPU backend: max and average pooling against direct-loop references
// (padding, overlapping and tiled windows, ties), and numerical gradient checks of
// Pool2d (max and average) and GlobalAvgPool with batch > 1 and odd, non-square sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "gradient_check.hpp"
#include "nn/global_avgpool.hpp"
#include "nn/pool2d.hpp"

namespace hpctrain {
namespace {

using gradcheck::check_layer_gradients;
using gradcheck::expect_close;
using gradcheck::GradCheckOptions;
using gradcheck::random_vector;

std::vector<float> pool_ref(const Pool2dShape& s, const std::vector<float>& x, bool max) {
  std::vector<float> y;
  for (int pl = 0; pl < s.n * s.c; ++pl) {
    for (int oy = 0; oy < s.out_h(); ++oy) {
      for (int ox = 0; ox < s.out_w(); ++ox) {
        double best = -1e300, sum = 0.0;
        for (int ki = 0; ki < s.kh; ++ki) {
          for (int kj = 0; kj < s.kw; ++kj) {
            const int iy = oy * s.stride_h - s.pad_h + ki, ix = ox * s.stride_w - s.pad_w + kj;
            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;  // padding: never a max
            const double v = x[(static_cast<size_t>(pl) * s.h + iy) * s.w + ix];
            best = std::max(best, v);
            sum += v;
          }
        }
        y.push_back(static_cast<float>(max ? best : sum / (s.kh * s.kw)));
      }
    }
  }
  return y;
}

TEST(CpuPool, ForwardMatchesReferenceWithPadding) {
  CpuBackend be(1);
  for (const Pool2dShape& s :
       {Pool2dShape{3, 2, 7, 5, 3, 3, 2, 2, 1, 1}, Pool2dShape{2, 3, 7, 5, 2, 2, 2, 2, 0, 0},
        Pool2dShape{2, 1, 6, 9, 3, 2, 1, 3, 1, 1}}) {
    const std::vector<float> x = random_vector(static_cast<size_t>(s.n) * s.c * s.h * s.w, 51, 1.0);
    std::vector<float> y(static_cast<size_t>(s.n) * s.c * s.out_h() * s.out_w());
    be.maxpool2d_forward(s, x.data(), y.data());
    expect_close(y, pool_ref(s, x, true), 1e-6, "max");
    be.avgpool2d_forward(s, x.data(), y.data());
    expect_close(y, pool_ref(s, x, false), 1e-5, "avg");
  }
}

// Max-pool backward by the documented rule: each window's first maximum (row-major,
// padding skipped) receives the output's gradient, summed where windows overlap.
std::vector<float> maxpool_backward_ref(const Pool2dShape& s, const std::vector<float>& x,
                                        const std::vector<float>& dy) {
  std::vector<float> dx(x.size(), 0.0f);
  size_t o = 0;
  for (int pl = 0; pl < s.n * s.c; ++pl) {
    for (int oy = 0; oy < s.out_h(); ++oy) {
      for (int ox = 0; ox < s.out_w(); ++ox, ++o) {
        size_t best = 0;
        bool found = false;
        for (int ki = 0; ki < s.kh; ++ki) {
          for (int kj = 0; kj < s.kw; ++kj) {
            const int iy = oy * s.stride_h - s.pad_h + ki, ix = ox * s.stride_w - s.pad_w + kj;
            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
            const size_t idx = (static_cast<size_t>(pl) * s.h + iy) * s.w + ix;
            if (!found || x[idx] > x[best]) best = idx;
            found = true;
          }
        }
        dx[best] += dy[o];
      }
    }
  }
  return dx;
}

// Every backward path (2x2 tiles, other tiles, overlapping/padded windows), odd and even
// sizes, on random inputs and on inputs full of ties (values from {0, 1, 2}).
TEST(CpuPool, MaxBackwardMatchesFirstMaximumRule) {
  CpuBackend be(1);
  for (const Pool2dShape& s :
       {Pool2dShape{3, 2, 7, 5, 2, 2, 2, 2, 0, 0}, Pool2dShape{2, 2, 8, 6, 2, 2, 2, 2, 0, 0},
        Pool2dShape{3, 2, 7, 5, 3, 3, 3, 3, 0, 0}, Pool2dShape{3, 2, 7, 5, 3, 3, 2, 2, 1, 1},
        Pool2dShape{2, 1, 6, 9, 3, 2, 1, 3, 1, 1}}) {
    SCOPED_TRACE("k " + std::to_string(s.kh) + "x" + std::to_string(s.kw) + " s " +
                 std::to_string(s.stride_h) + " in " + std::to_string(s.h) + "x" +
                 std::to_string(s.w));
    const size_t nx = static_cast<size_t>(s.n) * s.c * s.h * s.w;
    const size_t ny = static_cast<size_t>(s.n) * s.c * s.out_h() * s.out_w();
    const std::vector<float> dy = random_vector(ny, 52);
    std::vector<float> ties = random_vector(nx, 53);
    for (float& v : ties) v = std::min(2.0f, std::floor(std::fabs(v) * 1.5f));
    for (const std::vector<float>& x : {random_vector(nx, 54), ties}) {
      std::vector<float> y(ny), dx(nx, 7.0f);  // dx must be overwritten
      be.maxpool2d_forward(s, x.data(), y.data());
      be.maxpool2d_backward(s, x.data(), y.data(), dy.data(), dx.data());
      expect_close(dx, maxpool_backward_ref(s, x, dy), 1e-6, "dx");
    }
  }
}

// ---- Layer gradient checks: batch 3, 2 channels, 7x5 ----

TEST(GradientCheck, MaxPool2d) {
  GradCheckOptions opt;
  opt.distinct_inputs = true;
  opt.max_checks = 1000;
  Pool2d plain("p", Pool2d::Kind::kMax, 2, 2);
  check_layer_gradients(plain, {2, 7, 5}, 3, opt);
  Pool2d padded("p", Pool2d::Kind::kMax, 3, 2, 1);
  check_layer_gradients(padded, {2, 7, 5}, 3, opt);
  Pool2d tiles3("p", Pool2d::Kind::kMax, 3, 3);
  check_layer_gradients(tiles3, {2, 7, 5}, 3, opt);
}

TEST(GradientCheck, AvgPool2d) {
  GradCheckOptions opt;
  opt.max_checks = 1000;
  Pool2d plain("a", Pool2d::Kind::kAvg, 2, 2);
  check_layer_gradients(plain, {2, 7, 5}, 3, opt);
  Pool2d padded("a", Pool2d::Kind::kAvg, 3, 2, 1);
  check_layer_gradients(padded, {2, 7, 5}, 3, opt);
}

TEST(GradientCheck, GlobalAvgPool) {
  GlobalAvgPool layer("g");
  EXPECT_EQ(layer.output_dims({2, 7, 5}), Dims{2});
  GradCheckOptions opt;
  opt.max_checks = 1000;
  check_layer_gradients(layer, {2, 7, 5}, 3, opt);
}

TEST(GlobalAvgPool, IsTheChannelMean) {
  CpuBackend be(1);
  GlobalAvgPool layer("g");
  const Dims in = {2, 3, 5};
  layer.output_dims(in);
  std::vector<float> x = random_vector(2 * 30, 61), y(4);
  Tensor tx{x.data(), 2, in}, ty{y.data(), 2, {2}};
  layer.forward(be, tx, ty, false);
  for (int p = 0; p < 4; ++p) {
    double mean = 0.0;
    for (int j = 0; j < 15; ++j) mean += x[p * 15 + j] / 15.0;
    EXPECT_NEAR(y[p], mean, 1e-5) << p;
  }
}

}  // namespace
}  // namespace hpctrain
