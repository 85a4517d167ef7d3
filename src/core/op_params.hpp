// The plain structs that describe backend operations: what the Backend interface
// (backend/backend.hpp) and the CUDA kernels (kernels/) both read, so that kernels/ needs
// nothing of the interface itself. The Adam coefficients and update are written here once
// for both the CPU backend and the CUDA kernel, so that the two round them alike.
#pragma once

#include <cmath>
#include <cstddef>

#include "core/host_device.hpp"

namespace hpctrain {

// Loss statistics accumulated on the device across steps and read once per
// phase, so the step loop never waits for the device to report a loss.
struct LossStats {
  double loss_sum = 0.0;  // sum of per-sample cross-entropy
  double correct = 0.0;   // samples whose arg-max equals the label
  double count = 0.0;     // samples seen
};

struct SgdParams {
  float lr = 0.0f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

struct AdamParams {
  float lr = 0.0f;
  double beta1 = 0.9, beta2 = 0.999;  // double: the bias corrections 1 - beta^t need it
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled = false;  // AdamW: weight decay applied to the parameters, not the gradient
};

// Per-channel normalisation of input images as they are decoded (Backend::decode_input):
// value i becomes (decoded - mean[c]) * inv_std[c], c = (i / plane) % channels, in float32,
// as the loader computes it on the host (Preprocess). mean null: no normalisation.
struct InputNorm {
  const float* mean = nullptr;  // `channels` values each, in the backend's memory
  const float* inv_std = nullptr;
  int channels = 0;
  size_t plane = 0;  // values per channel of one sample (h * w)
};

// Normalises n float32 values of whole planes in place as `norm` says (mean not null),
// plane k by channel k % channels: the host's arithmetic, which the loader's reader threads
// and the CPU backend's decode share and the GPU's decode kernels repeat unfused.
inline void normalize_planes(float* x, size_t n, const InputNorm& norm) {
  for (size_t start = 0, k = 0; start < n; start += norm.plane, ++k) {
    const size_t c = k % static_cast<size_t>(norm.channels);
    const float mean = norm.mean[c], inv_std = norm.inv_std[c];
    float* v = x + start;
    for (size_t j = 0; j < norm.plane && start + j < n; ++j) v[j] = (v[j] - mean) * inv_std;
  }
}

// The float32 values of a dynamic loss scaler's device state (Backend::unscale_grads).
struct LossScaleState {
  enum : size_t {
    kScale,     // the factor the loss gradient is multiplied by
    kGood,      // steps since the last overflow or growth
    kFoundInf,  // this step's gradients overflowed
    kSkipped,   // steps skipped so far (counted up; read and reset per epoch)
    kCount
  };
};

// The per-step scalars of an Adam update (Backend::adam_update). The bias corrections are
// taken in double, as PyTorch does on the host: 1 - 0.999^t in float loses 1e-5 of its value.
struct AdamCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;   // lr / (1 - beta1^t)
  float bias2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  // p' = p * decay and g' = g + l2 * p: Adam decays through the gradient (decay 1), AdamW
  // through the parameter (l2 0), so the update needs no branch.
  float decay, l2;
};

// `step`: the steps taken, this one included (>= 1).
HT_HOST_DEVICE inline AdamCoefficients adam_coefficients(const AdamParams& a, float step) {
  const double t = step;
  AdamCoefficients c;
  c.beta1 = static_cast<float>(a.beta1);
  c.one_minus_beta1 = static_cast<float>(1.0 - a.beta1);
  c.beta2 = static_cast<float>(a.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - a.beta2);
  c.step_size = static_cast<float>(a.lr / (1.0 - std::pow(a.beta1, t)));
  c.bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(a.beta2, t)));
  c.eps = a.eps;
  c.decay = a.decoupled ? 1.0f - a.lr * a.weight_decay : 1.0f;
  c.l2 = a.decoupled ? 0.0f : a.weight_decay;
  return c;
}

// One element's Adam update with the step's coefficients: the CPU loop and the CUDA kernel
// both call it, so that the two compute it alike.
HT_HOST_DEVICE inline void adam_element(const AdamCoefficients& c, float& param, float grad,
                                        float& m, float& v) {
  const float p = param * c.decay;
  const float g = grad + c.l2 * param;
  const float mi = c.beta1 * m + c.one_minus_beta1 * g;
  const float vi = c.beta2 * v + c.one_minus_beta2 * g * g;
  m = mi;
  v = vi;
  param = p - c.step_size * mi / (std::sqrt(vi) / c.bias2_sqrt + c.eps);
}

}  // namespace hpctrain
