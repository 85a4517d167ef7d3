// kernels/rnn.cu under the emulation against the CPU backend: the sequence layout swap bit
// for bit, and LSTM and GRU steps forward and backward (a first step without the previous
// state, then one with it) within one rounding of the activation type.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "emu/emu_fixture.hpp"

namespace hpctrain::test {
namespace {

TEST_P(EmuVsCpu, SwapLeadingBitForBit) {
  const int a = 5, b = 7, inner = 3;
  const Acts src = acts(random_vector(size_t(a) * b * inner, 21));
  Acts want(t_, src.floats().size());
  cpu_.swap_leading(src.data(), want.data(), a, b, inner);
  const auto got = both_orders([&] {
    Acts y = Acts::nan(t_, src.floats().size());
    kernels::swap_leading(t_, src.data(), y.data(), a, b, inner, kStream);
    return results(y.floats());
  });
  expect_same(got[0], want.floats(), "swap_leading");
  EXPECT_EQ(want.floats()[size_t(3 * a + 2) * inner + 1],
            src.floats()[size_t(2 * b + 3) * inner + 1]);
}

TEST_P(EmuVsCpu, LstmStepForwardAndBackward) {
  const int batch = 3, hidden = 37;  // hidden not a multiple of a warp
  const size_t nz = size_t(batch) * 4 * hidden, nh = size_t(batch) * hidden;
  const Acts gx = acts(random_vector(nz, 22)), gh = acts(random_vector(nz, 23));
  const std::vector<float> b_ih = random_vector(4 * hidden, 24, 0.3);
  const std::vector<float> b_hh = random_vector(4 * hidden, 25, 0.3);
  const std::vector<float> c_prev = random_vector(nh, 26);
  const Acts dh = acts(random_vector(nh, 27));
  const std::vector<float> dc_in = random_vector(nh, 28);
  for (const bool first : {true, false}) {
    SCOPED_TRACE(first ? "first step" : "later step");
    const void* ghp = first ? nullptr : gh.data();
    const float* cp = first ? nullptr : c_prev.data();
    std::vector<float> gates(nz), c(nh), dc = dc_in;
    Acts h(t_, nh), dz(t_, nz);
    cpu_.lstm_forward_step(gx.data(), ghp, b_ih.data(), b_hh.data(), cp, gates.data(), c.data(),
                           h.data(), batch, hidden);
    cpu_.lstm_backward_step(gates.data(), c.data(), cp, dh.data(), dc.data(), dz.data(), batch,
                            hidden);
    const auto got = both_orders([&] {
      std::vector<float> g(nz, kNaN), cc(nh, kNaN), d = dc_in;
      Acts hh = Acts::nan(t_, nh), zz = Acts::nan(t_, nz);
      kernels::lstm_forward_step(t_, gx.data(), ghp, b_ih.data(), b_hh.data(), cp, g.data(),
                                 cc.data(), hh.data(), batch, hidden, kStream);
      kernels::lstm_backward_step(t_, g.data(), cc.data(), cp, dh.data(), d.data(), zz.data(),
                                  batch, hidden, kStream);
      return results(g, cc, hh.floats(), d, zz.floats());
    });
    expect_close(got[0], gates, 1e-6, "gates");
    expect_close(got[1], c, 1e-6, "c");
    expect_close(got[2], h.floats(), act_tol(), "h");
    expect_close(got[3], dc, 1e-6, "dc");
    expect_close(got[4], dz.floats(), act_tol(), "dz");
  }
}

TEST_P(EmuVsCpu, GruStepForwardAndBackward) {
  const int batch = 3, hidden = 37;
  const size_t nz = size_t(batch) * 3 * hidden, nh = size_t(batch) * hidden;
  const Acts gx = acts(random_vector(nz, 32)), gh = acts(random_vector(nz, 33));
  const std::vector<float> b_ih = random_vector(3 * hidden, 34, 0.3);
  const std::vector<float> b_hh = random_vector(3 * hidden, 35, 0.3);
  const Acts h_prev = acts(random_vector(nh, 36)), dh = acts(random_vector(nh, 37));
  for (const bool first : {true, false}) {
    SCOPED_TRACE(first ? "first step" : "later step");
    const void* ghp = first ? nullptr : gh.data();
    const void* hp = first ? nullptr : h_prev.data();
    std::vector<float> gates(nz), hn(nh);
    Acts h(t_, nh), dgx(t_, nz), dgh(t_, nz), dhp(t_, nh);
    cpu_.gru_forward_step(gx.data(), ghp, b_ih.data(), b_hh.data(), hp, gates.data(), hn.data(),
                          h.data(), batch, hidden);
    cpu_.gru_backward_step(gates.data(), hn.data(), hp, dh.data(), dgx.data(), dgh.data(),
                           dhp.data(), batch, hidden);
    const auto got = both_orders([&] {
      std::vector<float> g(nz, kNaN), n(nh, kNaN);
      Acts hh = Acts::nan(t_, nh), gxx = Acts::nan(t_, nz), ghh = Acts::nan(t_, nz),
           dd = Acts::nan(t_, nh);
      kernels::gru_forward_step(t_, gx.data(), ghp, b_ih.data(), b_hh.data(), hp, g.data(),
                                n.data(), hh.data(), batch, hidden, kStream);
      kernels::gru_backward_step(t_, g.data(), n.data(), hp, dh.data(), gxx.data(), ghh.data(),
                                 dd.data(), batch, hidden, kStream);
      return results(g, n, hh.floats(), gxx.floats(), ghh.floats(), dd.floats());
    });
    expect_close(got[0], gates, 1e-6, "gates");
    expect_close(got[1], hn, 1e-6, "hn");
    expect_close(got[2], h.floats(), act_tol(), "h");
    expect_close(got[3], dgx.floats(), act_tol(), "dgx");
    expect_close(got[4], dgh.floats(), act_tol(), "dgh");
    expect_close(got[5], dhp.floats(), act_tol(), "dh_prev");
  }
}

}  // namespace
}  // namespace hpctrain::test
