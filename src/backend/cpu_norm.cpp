// CPU batch normalisation and dropout. Batch normalisation works on one channel at a time:
// its n planes of hw values are strided by c * hw. Sums run in float within a plane (the
// loops vectorise) and in double across planes, so large batches keep their precision.
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
                 float s = 0.0f;
                 for (int j = 0; j < hw; ++j) s += p[j];
                 sum += s;
               }
               const double mean = sum / m;
               const float mean_f = static_cast<float>(mean);
               double sq = 0.0;
               for (int i = 0; i < n; ++i) {
                 const float* p = x + plane_offset(i, ch, c, hw);
                 float s = 0.0f;
                 for (int j = 0; j < hw; ++j) s += (p[j] - mean_f) * (p[j] - mean_f);
                 sq += s;
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
                 const size_t o = plane_offset(i, ch, c, hw);
                 float s = 0.0f, t = 0.0f;
                 for (int j = 0; j < hw; ++j) {
                   s += dy[o + j];
                   t += dy[o + j] * (x[o + j] - mean);
                 }
                 sum_dy += s;
                 sum_dy_xc += t;
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
