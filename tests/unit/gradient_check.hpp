// Numerical gradient checking for layers on the CPU backend, shared by the layer tests:
// central differences of L = sum(y * r) against backward(dy = r), on random non-zero
// inputs, checking parameter and input gradients; and whole models through the loss.

#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "core/random.hpp"
#include "nn/layer.hpp"
#include "nn/model.hpp"

namespace hpctrain::gradcheck {

// Compares one analytic derivative with the central difference of l(+eps), l(0), l(-eps).
// When kinks are allowed (max_kink_fraction > 0), a derivative that misses the tolerance
// where the one-sided slopes disagree beyond it (the function is not smooth there) is
// counted as a kink instead of a failure.
class DerivativeCheck {
 public:
  DerivativeCheck(double tol, double eps, double max_kink_fraction)
      : tol_(tol), eps_(eps), max_kink_fraction_(max_kink_fraction) {}
  ~DerivativeCheck() {
    EXPECT_LE(static_cast<double>(kinks_), max_kink_fraction_ * static_cast<double>(checks_))
        << kinks_ << " of " << checks_ << " checks hit a kink";
    if (checks_ > 0) {
      EXPECT_GT(checks_, kinks_);
    }
  }
  void check(double analytic, double lp, double l0, double lm, const std::string& what) {
    ++checks_;
    const double numeric = (lp - lm) / (2 * eps_);
    const double bound = tol_ * std::max(1.0, std::fabs(numeric));
    if (std::fabs(analytic - numeric) <= bound) return;
    // Only a mismatch is excused by a kink: float32 rounding of l alone can make the
    // one-sided slopes differ by more than the bound where the derivative is right.
    if (max_kink_fraction_ > 0 && std::fabs((lp - l0) - (l0 - lm)) / eps_ > bound) {
      ++kinks_;
      return;
    }
    EXPECT_NEAR(analytic, numeric, bound) << what;
  }

 private:
  double tol_, eps_, max_kink_fraction_;
  size_t checks_ = 0, kinks_ = 0;
};

inline std::vector<float> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
  return v;
}

// Element-wise |got - want| <= tol * max(1, |want|); stops at the first mismatch.
template <typename A, typename B>
void expect_close(const std::vector<A>& got, const std::vector<B>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = static_cast<double>(want[i]);
    ASSERT_NEAR(got[i], w, tol * std::max(1.0, std::fabs(w))) << what << "[" << i << "]";
  }
}

struct GradCheckOptions {
  double tol = 1e-3;  // relative, against max(1, |numeric|)
  float eps = 1e-2f;
  // Inputs spaced 4 * eps apart (a shuffled ramp), so a perturbation never changes which
  // element of a max-pooling window wins; otherwise normal values kept 0.05 from zero
  // (away from the ReLU kink).
  bool distinct_inputs = false;
  size_t max_checks = 97;  // per array; elements are checked at an even stride
  size_t conv_chunk_bytes = CpuBackend::kDefaultConvChunkBytes;
  // Networks with ReLUs after BatchNorm have many values near the kink, and a perturbation
  // that moves one across it breaks the central difference. With a fraction f > 0, a check
  // whose one-sided slopes disagree by more than the tolerance is skipped as a kink, and at
  // most f of the checks may be skipped.
  double max_kink_fraction = 0.0;
};

// L = sum(y * r) for the current parameters and input.
inline double weighted_output(Layer& layer, CpuBackend& be, std::vector<float>& x, int64_t batch,
                              const Dims& in_dims, const Dims& out_dims,
                              const std::vector<float>& r) {
  Tensor tx{x.data(), batch, in_dims};
  std::vector<float> y(static_cast<size_t>(batch * dims_elems(out_dims)));
  Tensor ty{y.data(), batch, out_dims};
  layer.forward(be, tx, ty, true);
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * r[i];
  return l;
}

// A one-thread CPU backend per conv chunk size that lives as long as the test program: a
// layer keeps the buffers allocate() gave it until the test that owns the layer ends.
inline CpuBackend& test_backend(size_t conv_chunk_bytes) {
  static std::map<size_t, std::unique_ptr<CpuBackend>> backends;
  std::unique_ptr<CpuBackend>& be = backends[conv_chunk_bytes];
  if (!be) be = std::make_unique<CpuBackend>(1, conv_chunk_bytes);
  return *be;
}

inline void check_layer_gradients(Layer& layer, const Dims& in_dims, int64_t batch,
                                  const GradCheckOptions& opt = {}) {
  CpuBackend& be = test_backend(opt.conv_chunk_bytes);
  const Dims out_dims = layer.output_dims(in_dims);
  const size_t np = layer.param_count();
  std::vector<float> params(np), grads(np);
  layer.bind(ParamSlice::f32(params.data(), grads.data()));
  std::vector<float> state(layer.state_count());
  layer.bind_state(state.data());
  layer.init_state(state.data());
  layer.allocate(be, batch);
  std::vector<float> workspace(layer.workspace_bytes(be, batch) / sizeof(float) + 1);
  layer.set_workspace(workspace.data());
  Rng rng(3);
  layer.init_params(rng, params.data());
  // Non-zero biases so their gradient path is exercised with real values.
  for (auto& p : params) p += static_cast<float>(0.1 * rng.normal());
  const size_t nx = static_cast<size_t>(batch * dims_elems(in_dims));
  std::vector<float> x = random_vector(nx, 11);
  if (opt.distinct_inputs) {
    std::vector<size_t> order(nx);
    std::iota(order.begin(), order.end(), size_t{0});
    for (size_t i = nx; i > 1; --i) std::swap(order[i - 1], order[rng.uniform_int(i)]);
    for (size_t i = 0; i < nx; ++i) {
      x[i] = 4 * opt.eps * (static_cast<float>(order[i]) - static_cast<float>(nx) / 2);
    }
  } else {
    for (auto& v : x) {
      if (std::fabs(v) < 0.05f) v = 0.05f;  // keep ReLU away from its kink
    }
  }
  const std::vector<float> r = random_vector(static_cast<size_t>(batch * dims_elems(out_dims)), 12);

  // Analytic gradients.
  std::vector<float> y(r.size()), dx(x.size());
  Tensor tx{x.data(), batch, in_dims}, ty{y.data(), batch, out_dims};
  layer.forward(be, tx, ty, true);
  std::vector<float> dy = r;
  Tensor tdy{dy.data(), batch, out_dims}, tdx{dx.data(), batch, in_dims};
  layer.backward(be, tx, ty, tdy, &tdx);

  const double l0 = weighted_output(layer, be, x, batch, in_dims, out_dims, r);
  auto check = [&](std::vector<float>& v, const std::vector<float>& analytic, const char* what) {
    DerivativeCheck d(opt.tol, opt.eps, opt.max_kink_fraction);
    for (size_t i = 0; i < v.size(); i += std::max<size_t>(1, v.size() / opt.max_checks)) {
      const float saved = v[i];
      v[i] = saved + opt.eps;
      const double lp = weighted_output(layer, be, x, batch, in_dims, out_dims, r);
      v[i] = saved - opt.eps;
      const double lm = weighted_output(layer, be, x, batch, in_dims, out_dims, r);
      v[i] = saved;
      d.check(analytic[i], lp, l0, lm,
              std::string(layer.type()) + " " + what + "[" + std::to_string(i) + "]");
    }
  };
  const std::vector<float> grads_copy = grads;
  check(params, grads_copy, "param");
  check(x, dx, "input");
}

// Cross-entropy backward through the model against central differences of the mean loss,
// for every `stride`-th parameter (max_kink_fraction: see GradCheckOptions).
inline void check_model_gradients(Model& m, std::vector<float>& x,
                                  const std::vector<int32_t>& labels, int classes, size_t stride,
                                  double tol, double max_kink_fraction = 0.0) {
  Backend& be = m.backend();
  const int batch = static_cast<int>(labels.size());
  auto loss = [&]() {
    LossStats s;
    const Tensor& logits = m.forward(x.data(), batch, true);
    be.softmax_xent(logits.data, labels.data(), batch, classes, 0.0f, nullptr, nullptr, &s);
    return s.loss_sum / batch;
  };
  LossStats s;
  const Tensor& logits = m.forward(x.data(), batch, true);
  be.softmax_xent(logits.data, labels.data(), batch, classes, 1.0f / batch, nullptr, m.dlogits(),
                  &s);
  m.backward();
  const std::vector<float> grads(m.grads(), m.grads() + m.param_count());
  const float eps = 1e-3f;
  const double l0 = loss();
  DerivativeCheck d(tol, eps, max_kink_fraction);
  for (size_t i = 0; i < m.param_count(); i += stride) {
    float& p = m.mutable_params()[i];
    const float saved = p;
    p = saved + eps;
    const double lp = loss();
    p = saved - eps;
    const double lm = loss();
    p = saved;
    d.check(grads[i], lp, l0, lm, "param " + std::to_string(i));
  }
}

}  // namespace hpctrain::gradcheck
