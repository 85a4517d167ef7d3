// CPU batch normalisation and dropout. Batch normalisation works on one channel at a time:
// its n planes of hw values are strided by c * hw. Sums run in float within a plane, in
// kLanes interleaved partial sums (plane_sums), and in double across planes, so large
// batches keep their precision.
#include <array>
#include <cmath>

#include "backend/cpu_backend.hpp"
#include "core/error.hpp"
#include "core/random.hpp"

namespace hpctrain {
namespace {

void check_shape(int n, int c, int hw) {
  HT_REQUIRE(n >= 1 && c >= 1 && hw >= 1, "batchnorm: invalid shape");
}

size_t plane_offset(int i, int ch, int c, int hw) {
  return (static_cast<size_t>(i) * c + ch) * static_cast<size_t>(hw);
}

// The sums over j in [0, hw) of each of the terms, term(j) returning one value per sum,
// in float: value j goes to partial sum j % kLanes (independent chains, which the compiler
// keeps in vector registers; one running sum it may not reorder, and its every addition
// waits for the one before), then the partial sums and the tail are added in a fixed
// order. Same result for any thread count.
constexpr int kLanes = 16;

template <size_t N, typename Term>
std::array<float, N> plane_sums(int hw, Term term) {
  float lanes[N][kLanes] = {};
  int j = 0;
  for (; j + kLanes <= hw; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const std::array<float, N> t = term(j + k);
      for (size_t s = 0; s < N; ++s) lanes[s][k] += t[s];
    }
  }
  std::array<float, N> sums{};
  for (size_t s = 0; s < N; ++s) {
    for (int k = 0; k < kLanes; ++k) sums[s] += lanes[s][k];
  }
  for (; j < hw; ++j) {
    const std::array<float, N> t = term(j);
    for (size_t s = 0; s < N; ++s) sums[s] += t[s];
  }
  return sums;
}

}  // namespace

void CpuBackend::batchnorm_forward_training_f32(const float* x, const float* gamma,
                                                const float* beta, float* y, int n, int c, int hw,
                                                float eps, float momentum, float* running_mean,
                                                float* running_var, float* save_mean,
                                                float* save_invstd) {
  check_shape(n, c, hw);
  const double m = static_cast<double>(n) * hw;
  parallel(static_cast<size_t>(c), grain_for(static_cast<size_t>(n) * hw),
           [&](size_t lo, size_t hi) {
             for (int ch = static_cast<int>(lo); ch < static_cast<int>(hi); ++ch) {
               double sum = 0.0;
               for (int i = 0; i < n; ++i) {
                 const float* p = x + plane_offset(i, ch, c, hw);
                 sum += plane_sums<1>(hw, [&](int j) { return std::array<float, 1>{p[j]}; })[0];
               }
               const double mean = sum / m;
               const float mean_f = static_cast<float>(mean);
               double sq = 0.0;
               for (int i = 0; i < n; ++i) {
                 const float* p = x + plane_offset(i, ch, c, hw);
                 sq += plane_sums<1>(hw, [&](int j) {
                   const float d = p[j] - mean_f;
                   return std::array<float, 1>{d * d};
                 })[0];
               }
               const double var = sq / m;
               const float invstd = static_cast<float>(1.0 / std::sqrt(var + eps));
               const float scale = gamma[ch] * invstd, shift = beta[ch] - mean_f * scale;
               for (int i = 0; i < n; ++i) {
                 const size_t o = plane_offset(i, ch, c, hw);
                 for (int j = 0; j < hw; ++j) y[o + j] = x[o + j] * scale + shift;
               }
               save_mean[ch] = mean_f;
               save_invstd[ch] = invstd;
               const double unbiased = m > 1 ? var * m / (m - 1) : var;
               running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mean_f;
               running_var[ch] =
                   (1.0f - momentum) * running_var[ch] + momentum * static_cast<float>(unbiased);
             }
           });
}

void CpuBackend::batchnorm_forward_inference_f32(const float* x, const float* gamma,
                                                 const float* beta, float* y, int n, int c, int hw,
                                                 float eps, const float* running_mean,
                                                 const float* running_var) {
  check_shape(n, c, hw);
  parallel(static_cast<size_t>(c), grain_for(static_cast<size_t>(n) * hw),
           [&](size_t lo, size_t hi) {
             for (int ch = static_cast<int>(lo); ch < static_cast<int>(hi); ++ch) {
               const float scale = gamma[ch] / std::sqrt(running_var[ch] + eps);
               const float shift = beta[ch] - running_mean[ch] * scale;
               for (int i = 0; i < n; ++i) {
                 const size_t o = plane_offset(i, ch, c, hw);
                 for (int j = 0; j < hw; ++j) y[o + j] = x[o + j] * scale + shift;
               }
             }
           });
}

void CpuBackend::batchnorm_backward_f32(const float* x, const float* dy, const float* gamma,
                                        float* dx, float* dgamma, float* dbeta, int n, int c,
                                        int hw, float /*eps: in save_invstd*/,
                                        const float* save_mean, const float* save_invstd) {
  check_shape(n, c, hw);
  const double m = static_cast<double>(n) * hw;
  parallel(static_cast<size_t>(c), grain_for(static_cast<size_t>(n) * hw),
           [&](size_t lo, size_t hi) {
             for (int ch = static_cast<int>(lo); ch < static_cast<int>(hi); ++ch) {
               const float mean = save_mean[ch], invstd = save_invstd[ch];
               // dbeta = sum(dy), dgamma = sum(dy * xhat) with xhat = (x - mean) * invstd.
               double sum_dy = 0.0, sum_dy_xc = 0.0;
               for (int i = 0; i < n; ++i) {
                 const float* g = dy + plane_offset(i, ch, c, hw);
                 const float* p = x + plane_offset(i, ch, c, hw);
                 const std::array<float, 2> s = plane_sums<2>(hw, [&](int j) {
                   return std::array<float, 2>{g[j], g[j] * (p[j] - mean)};
                 });
                 sum_dy += s[0];
                 sum_dy_xc += s[1];
               }
               dbeta[ch] = static_cast<float>(sum_dy);
               dgamma[ch] = static_cast<float>(sum_dy_xc * invstd);
               // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
               if (dx == nullptr) continue;
               const float k = gamma[ch] * invstd;
               const float mean_dy = static_cast<float>(sum_dy / m);
               const float xc_coef = static_cast<float>(sum_dy_xc / m) * invstd * invstd;
               for (int i = 0; i < n; ++i) {
                 const size_t o = plane_offset(i, ch, c, hw);
                 for (int j = 0; j < hw; ++j) {
                   dx[o + j] = k * (dy[o + j] - mean_dy - (x[o + j] - mean) * xc_coef);
                 }
               }
             }
           });
}

void CpuBackend::dropout_mask_f32(float* mask, size_t n, float p, uint64_t seed) {
  HT_REQUIRE(p >= 0.0f && p < 1.0f, "dropout: p must be in [0, 1)");
  const float keep_scale = 1.0f / (1.0f - p);
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) mask[i] = counter_uniform(seed, i) >= p ? keep_scale : 0.0f;
  });
}

}  // namespace hpctrain
