// kernels/ pooling and channels-last batch normalisation (alone and fused with the
// residual add and ReLU) under the emulation against the CPU backend (emu/emu_fixture.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/conv_shape.hpp"
#include "emu/emu_fixture.hpp"

namespace hpctrain::test {
namespace {

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
// 16 bits), 4,000 rows (several row chunks merged), the same with the least scratch the
// kernels accept (one chunk; a plan that overran it would fail AddressSanitizer, as the
// scratch is exactly that long), ResNet-34's layer2 and layer4 shapes at batch 2, one row,
// buffers one value off a 16-byte boundary, and 70,000 rows (1,093 chunks in float32: more
// than one round of the merge kernels' 128 lanes x 8 running sums; float32 only, where 16-bit
// values, 8 an access, make half as many chunks).
TEST_P(EmuVsCpu, BatchNormChannelsLast) {
  struct Case {
    int rows, c;
    size_t offset;
    bool least_scratch = false;
  };
  const float eps = 1e-5f, momentum = 0.1f;
  for (const Case k : {Case{200, 64, 0}, Case{105, 6, 0}, Case{14, 3, 0}, Case{4000, 16, 0},
                       Case{4000, 16, 0, true}, Case{100, 520, 0}, Case{1568, 128, 0},
                       Case{98, 512, 0}, Case{1, 8, 0}, Case{200, 64, 1}, Case{70000, 64, 0}}) {
    if (k.rows > 20000 && t_ != DType::kF32) continue;
    SCOPED_TRACE("rows=" + std::to_string(k.rows) + " c=" + std::to_string(k.c) +
                 " offset=" + std::to_string(k.offset) + (k.least_scratch ? " least scratch" : ""));
    const size_t scratch_floats =
        k.least_scratch ? kernels::batchnorm_nhwc_min_scratch(k.c) : size_t{1} << 21;
    std::vector<float> scratch(scratch_floats);
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

}  // namespace
}  // namespace hpctrain::test
