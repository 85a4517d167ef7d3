// The per-step scalars of an Adam update (Backend::adam_update), shared by the CPU backend
// and the CUDA kernel so that both round them alike. The bias corrections are taken in
// double, as PyTorch does on the host: 1 - 0.999^t in float loses 1e-5 of its value.
#pragma once

#include <cmath>

#include "backend/backend.hpp"
#include "core/host_device.hpp"

namespace hpctrain {

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

}  // namespace hpctrain
