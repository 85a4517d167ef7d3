// Dense layer forward and backward as three GEMMs.
#include "nn/dense.hpp"

#include <climits>
#include <cmath>

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {

Dims Dense::output_dims(const Dims& input) {
  if (!per_step_) {
    in_ = dims_elems(input);  // flattens C,H,W inputs
    return {out_};
  }
  if (input.size() < 2) {
    throw UsageError("dense " + name() + ": per_step needs a sequence [steps, features], got " +
                     std::to_string(input.size()) + " dim(s)");
  }
  // As lstm and gru read theirs: every dimension but the last counts steps, so an image
  // [C, H, W] is C x H steps of W features, and the output is a sequence [steps, units]
  // (kept [C, H, units], it would be an activation with channels, which channels-last
  // backends store in another order).
  in_ = input.back();
  steps_ = dims_elems(input) / in_;
  return {steps_, out_};
}

void Dense::bind(const ParamSlice& p) {
  w_ = p.weights_at(0);
  b_ = p.params + out_ * in_;
  dw_ = p.grads;
  db_ = p.grads + out_ * in_;
}

void Dense::init_params(Rng& rng, float* host_params) {
  const int64_t n = out_ * in_;
  if (init_ == Init::kHe) {
    // He normal (fan-in): keeps activation variance through ReLU layers.
    const double std_dev = std::sqrt(2.0 / static_cast<double>(in_));
    for (int64_t i = 0; i < n; ++i) host_params[i] = static_cast<float>(rng.normal() * std_dev);
  } else {
    // Glorot uniform: small initial logits for a softmax head.
    const double limit = std::sqrt(6.0 / static_cast<double>(in_ + out_));
    for (int64_t i = 0; i < n; ++i) {
      host_params[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
    }
  }
  for (int64_t i = 0; i < out_; ++i) host_params[n + i] = 0.0f;
}

void Dense::forward(Backend& backend, const Tensor& x, Tensor& y, bool /*training*/) {
  const int batch = static_cast<int>(x.batch * steps_);  // rows
  // y[b, out] = x[b, in] * W[out, in]^T
  backend.gemm(false, true, batch, static_cast<int>(out_), static_cast<int>(in_), 1.0f, x.data, w_,
               0.0f, y.data);
  backend.add_bias(y.data, b_, batch, static_cast<int>(out_));
}

void Dense::backward(Backend& backend, const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                     Tensor* dx) {
  const int batch = static_cast<int>(x.batch * steps_);  // rows
  const int out = static_cast<int>(out_), in = static_cast<int>(in_);
  // dW[out, in] = dy[b, out]^T * x[b, in];  db = column sums of dy
  backend.gemm_f32_out(true, false, out, in, batch, 1.0f, dy.data, x.data, 0.0f, dw_);
  backend.sum_rows(dy.data, db_, batch, out);
  // dx[b, in] = dy[b, out] * W[out, in]
  if (dx != nullptr) backend.gemm(false, false, batch, in, out, 1.0f, dy.data, w_, 0.0f, dx->data);
}

extern const LayerType kDenseLayer = {
    {"dense",
     "fully connected: units outputs from its flattened input, He-normal initialisation",
     {{"units", integer(1, INT_MAX), std::nullopt, "outputs"},
      {"per_step", flag(), false,
       "apply to every step of a sequence [steps, in] (the same weights), giving [steps, units]"}}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> {
      return std::make_unique<Dense>(s.name, s.integer("units"), Dense::Init::kHe,
                                     s.flag("per_step"));
    }};

}  // namespace hpctrain
