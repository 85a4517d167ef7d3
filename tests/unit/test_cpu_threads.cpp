// The CPU backend with a thread team against the same backend on one thread: every
// operation the team splits (GEMM rows or columns, convolution batches, pooling planes,
// BatchNorm channels, element ranges), at sizes that split unevenly. Loops whose split
// changes no arithmetic must give identical results; GEMM sub-blocks (BLAS kernels treat
// block edges differently) and the filter gradient (summed per thread, then across
// threads) agree within float rounding.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "gradient_check.hpp"

namespace hpctrain {
namespace {

using gradcheck::expect_close;
using gradcheck::random_vector;

TEST(ThreadPool, RunsEveryIndexOnceAndRethrows) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int rep = 0; rep < 100; ++rep) {
    std::vector<int> hits(3, 0);
    pool.run([&](int t) { ++hits[t]; });
    ASSERT_EQ(hits, (std::vector<int>{1, 1, 1})) << rep;
  }
  std::vector<int> covered(1001, 0);
  pool.parallel_for(covered.size(), 10, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) ++covered[i];
  });
  EXPECT_EQ(covered, std::vector<int>(1001, 1));
  const auto fail_on_last = [](int t) {
    if (t == 2) throw Error("worker failed");
  };
  EXPECT_THROW(pool.run(fail_on_last), Error);
  int after = 0;
  pool.run([&](int t) {
    if (t == 0) after = 1;
  });
  EXPECT_EQ(after, 1);  // still usable after an exception
}

struct Pair {
  CpuBackend one{1, 1 << 12}, team{3, 1 << 12};
};

TEST(CpuThreads, GemmSplitsRowsOrColumns) {
  Pair b;
  for (auto [m, n, k] : {std::tuple{301, 67, 129}, std::tuple{23, 517, 129}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      auto a = random_vector(m * k, 1), x = random_vector(k * n, 2), c = random_vector(m * n, 3);
      std::vector<float> c1 = c, c3 = c;
      b.one.gemm(ta, tb, m, n, k, 0.5f, a.data(), x.data(), 0.25f, c1.data());
      b.team.gemm(ta, tb, m, n, k, 0.5f, a.data(), x.data(), 0.25f, c3.data());
      SCOPED_TRACE(testing::Message() << m << "x" << n << " ta=" << ta << " tb=" << tb);
      expect_close(c3, c1, 1e-5, "gemm");
    }
  }
}

TEST(CpuThreads, ConvolutionSplitsTheBatch) {
  Pair b;
  const Conv2dShape s{7, 3, 11, 9, 5, 3, 3, 2, 2, 1, 1};
  auto x = random_vector(static_cast<size_t>(s.n) * s.c_in * s.h * s.w, 1);
  auto w = random_vector(static_cast<size_t>(s.c_out) * s.patch(), 2);
  const size_t ny = static_cast<size_t>(s.n) * s.c_out * s.out_h() * s.out_w();
  auto dy = random_vector(ny, 3);
  std::vector<float> ws1(b.one.conv2d_workspace_bytes(s) / 4),
      ws3(b.team.conv2d_workspace_bytes(s) / 4);
  std::vector<float> y1(ny), y3(ny), dx1(x.size()), dx3(x.size()), dw1(w.size()), dw3(w.size());
  b.one.conv2d_forward(s, x.data(), w.data(), y1.data(), ws1.data());
  b.team.conv2d_forward(s, x.data(), w.data(), y3.data(), ws3.data());
  EXPECT_EQ(y1, y3);
  b.one.conv2d_backward_data(s, dy.data(), w.data(), dx1.data(), ws1.data(), false);
  b.team.conv2d_backward_data(s, dy.data(), w.data(), dx3.data(), ws3.data(), false);
  EXPECT_EQ(dx1, dx3);
  b.one.conv2d_backward_data(s, dy.data(), w.data(), dx1.data(), ws1.data(), true);
  b.team.conv2d_backward_data(s, dy.data(), w.data(), dx3.data(), ws3.data(), true);
  EXPECT_EQ(dx1, dx3);
  b.one.conv2d_backward_filter(s, x.data(), dy.data(), dw1.data(), ws1.data());
  b.team.conv2d_backward_filter(s, x.data(), dy.data(), dw3.data(), ws3.data());
  expect_close(dw3, dw1, 1e-5, "filter gradient");
  // Fewer samples than threads: the spare threads sit out.
  Conv2dShape one_sample = s;
  one_sample.n = 1;
  b.team.conv2d_forward(one_sample, x.data(), w.data(), y3.data(), ws3.data());
  b.one.conv2d_forward(one_sample, x.data(), w.data(), y1.data(), ws1.data());
  EXPECT_EQ(std::vector<float>(y1.begin(), y1.begin() + ny / s.n),
            std::vector<float>(y3.begin(), y3.begin() + ny / s.n));
}

TEST(CpuThreads, PoolingNormalisationAndElementwise) {
  Pair b;
  const Pool2dShape p{5, 7, 9, 11, 3, 3, 2, 2, 1, 1};
  auto x = random_vector(static_cast<size_t>(p.n) * p.c * p.h * p.w, 1);
  const size_t ny = static_cast<size_t>(p.n) * p.c * p.out_h() * p.out_w();
  auto dy = random_vector(ny, 2);
  std::vector<float> y1(ny), y3(ny), dx1(x.size()), dx3(x.size());
  b.one.maxpool2d_forward(p, x.data(), y1.data());
  b.team.maxpool2d_forward(p, x.data(), y3.data());
  EXPECT_EQ(y1, y3);
  b.one.maxpool2d_backward(p, x.data(), y1.data(), dy.data(), dx1.data());
  b.team.maxpool2d_backward(p, x.data(), y3.data(), dy.data(), dx3.data());
  EXPECT_EQ(dx1, dx3);
  b.one.avgpool2d_backward(p, dy.data(), dx1.data());
  b.team.avgpool2d_backward(p, dy.data(), dx3.data());
  EXPECT_EQ(dx1, dx3);

  const int n = 5, c = 7, hw = 99;
  std::vector<float> gamma(c, 1.5f), beta(c, 0.25f), rm1(c), rv1(c, 1), rm3(c), rv3(c, 1), m1(c),
      m3(c), i1(c), i3(c), bn1(x.size()), bn3(x.size());
  b.one.batchnorm_forward_training(x.data(), gamma.data(), beta.data(), bn1.data(), n, c, hw, 1e-5f,
                                   0.1f, rm1.data(), rv1.data(), m1.data(), i1.data());
  b.team.batchnorm_forward_training(x.data(), gamma.data(), beta.data(), bn3.data(), n, c, hw,
                                    1e-5f, 0.1f, rm3.data(), rv3.data(), m3.data(), i3.data());
  EXPECT_EQ(bn1, bn3);
  EXPECT_EQ(rv1, rv3);
  std::vector<float> dg1(c), dg3(c), db1(c), db3(c);
  b.one.batchnorm_backward(x.data(), x.data(), gamma.data(), dx1.data(), dg1.data(), db1.data(), n,
                           c, hw, 1e-5f, m1.data(), i1.data());
  b.team.batchnorm_backward(x.data(), x.data(), gamma.data(), dx3.data(), dg3.data(), db3.data(), n,
                            c, hw, 1e-5f, m3.data(), i3.data());
  EXPECT_EQ(dx1, dx3);
  EXPECT_EQ(dg1, dg3);

  const size_t big = 200003;  // several parts of kElementGrain
  auto a = random_vector(big, 3), v = random_vector(big, 4);
  std::vector<float> r1(big), r3(big);
  b.one.relu_forward(a.data(), r1.data(), big);
  b.team.relu_forward(a.data(), r3.data(), big);
  EXPECT_EQ(r1, r3);
  std::vector<float> p1 = a, p3 = a, v1 = v, v3 = v;
  b.one.sgd_update(p1.data(), r1.data(), v1.data(), big, {0.1f, 0.9f, 1e-4f, true}, nullptr);
  b.team.sgd_update(p3.data(), r3.data(), v3.data(), big, {0.1f, 0.9f, 1e-4f, true}, nullptr);
  EXPECT_EQ(p1, p3);
  EXPECT_EQ(v1, v3);
  std::vector<float> s1(301), s3(301);
  b.one.sum_rows(a.data(), s1.data(), 601, 301);
  b.team.sum_rows(a.data(), s3.data(), 601, 301);
  EXPECT_EQ(s1, s3);
  std::vector<float> mask1(big), mask3(big);
  b.one.dropout_forward(a.data(), r1.data(), mask1.data(), big, 0.4f, 5);
  b.team.dropout_forward(a.data(), r3.data(), mask3.data(), big, 0.4f, 5);
  EXPECT_EQ(mask1, mask3);
}

}  // namespace
}  // namespace hpctrain
