// LSTM forward and backward (lstm.hpp): time-major buffers, GEMMs for the projections and
// the recurrence, the backend's point-wise step for the gates.
#include "nn/lstm.hpp"

#include <climits>
#include <cmath>

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {
namespace {

// `elems` activations past p.
std::byte* at(std::byte* p, size_t elems, size_t size) { return p + elems * size; }

}  // namespace

Dims Lstm::output_dims(const Dims& input) {
  if (input.empty()) throw UsageError("lstm " + name() + ": needs an input of [steps, features]");
  features_ = input.back();
  steps_ = 1;
  for (size_t i = 0; i + 1 < input.size(); ++i) steps_ *= input[i];
  if (input.size() < 2 || steps_ < 1) {
    throw UsageError("lstm " + name() + ": its input [" + std::to_string(features_) +
                     "] is not a sequence; it needs [steps, features] (an image reads its rows "
                     "as steps)");
  }
  levels_.clear();
  levels_.resize(static_cast<size_t>(layers_));
  size_t offset = 0;
  for (int64_t l = 0; l < layers_; ++l) {
    Level& v = levels_[static_cast<size_t>(l)];
    v.in = l == 0 ? features_ : units_;
    v.offset = offset;
    offset += level_params(v.in);
  }
  return return_sequences_ ? Dims{steps_, units_} : Dims{units_};
}

size_t Lstm::param_count() const {
  size_t n = 0;
  for (const Level& v : levels_) n += level_params(v.in);
  return n;
}

int64_t Lstm::forward_macs() const {
  int64_t macs = 0;
  for (const Level& v : levels_) macs += steps_ * 4 * units_ * (v.in + units_);
  return macs;
}

std::string Lstm::attributes() const {
  return "layers=" + std::to_string(layers_) + (return_sequences_ ? " sequences" : " last");
}

void Lstm::allocate(Backend& backend, int64_t max_batch) {
  act_size_ = dtype_size(backend.act_type());
  const size_t tb = static_cast<size_t>(steps_ * max_batch), b = static_cast<size_t>(max_batch);
  const size_t u = static_cast<size_t>(units_);
  for (Level& v : levels_) {
    v.gx = DeviceArray<std::byte>(backend, tb * 4 * u * act_size_);
    v.h = DeviceArray<std::byte>(backend, (tb + b) * u * act_size_);  // zero-filled: h0
    v.c = DeviceArray<float>(backend, tb * u);
    v.gates = DeviceArray<float>(backend, tb * 4 * u);
  }
  xt_ = DeviceArray<std::byte>(backend, tb * static_cast<size_t>(features_) * act_size_);
  gh_ = DeviceArray<std::byte>(backend, b * 4 * u * act_size_);
  dh_ = DeviceArray<std::byte>(backend, b * u * act_size_);
  dc_ = DeviceArray<float>(backend, b * u);
  grad_a_ = DeviceArray<std::byte>(backend, tb * u * act_size_);
  grad_b_ = DeviceArray<std::byte>(backend, layers_ > 1 ? tb * u * act_size_ : 0);
  dxt_ = DeviceArray<std::byte>(backend, tb * static_cast<size_t>(features_) * act_size_);
}

void Lstm::bind(const ParamSlice& p) {
  const size_t four = static_cast<size_t>(4 * units_), u = static_cast<size_t>(units_);
  for (Level& v : levels_) {
    const size_t in = static_cast<size_t>(v.in);
    const ParamSlice s = p.from(v.offset);
    v.w_ih = s.weights_at(0);
    v.w_hh = s.weights_at(four * in);
    v.b_ih = s.params + four * (in + u);
    v.b_hh = v.b_ih + four;
    v.dw_ih = s.grads;
    v.dw_hh = s.grads + four * in;
    v.db_ih = s.grads + four * (in + u);
    v.db_hh = v.db_ih + four;
  }
}

void Lstm::init_params(Rng& rng, float* host_params) {
  // PyTorch's default: every weight and bias uniform in +-1/sqrt(units).
  const double k = 1.0 / std::sqrt(static_cast<double>(units_));
  const size_t n = param_count();
  for (size_t i = 0; i < n; ++i) host_params[i] = static_cast<float>((2 * rng.uniform() - 1) * k);
}

void Lstm::forward(Backend& backend, const Tensor& x, Tensor& y, bool /*training*/) {
  const int b = static_cast<int>(x.batch), t_steps = static_cast<int>(steps_);
  const int u = static_cast<int>(units_), tb = t_steps * b;
  const size_t s = act_size_, bu = static_cast<size_t>(b) * units_;
  backend.swap_leading(x.data, xt_.data(), b, t_steps, static_cast<int>(features_));
  const void* in = xt_.data();
  for (Level& v : levels_) {
    // All steps' inputs onto the gates: gx[T*B, 4u] = in[T*B, in] * W_ih^T.
    backend.gemm(false, true, tb, 4 * u, static_cast<int>(v.in), 1.0f, in, v.w_ih, 0.0f,
                 v.gx.data());
    for (int t = 0; t < t_steps; ++t) {
      const void* h_prev = at(v.h.data(), t * bu, s);
      const void* gh = nullptr;
      if (t > 0) {
        backend.gemm(false, true, b, 4 * u, u, 1.0f, h_prev, v.w_hh, 0.0f, gh_.data());
        gh = gh_.data();
      }
      backend.lstm_forward_step(at(v.gx.data(), t * 4 * bu, s), gh, v.b_ih, v.b_hh,
                                t > 0 ? v.c.data() + (t - 1) * bu : nullptr,
                                v.gates.data() + t * 4 * bu, v.c.data() + t * bu,
                                at(v.h.data(), (t + 1) * bu, s), b, u);
    }
    in = at(v.h.data(), bu, s);  // steps 1..T: the next layer's input
  }
  Level& top = levels_.back();
  if (return_sequences_) {
    backend.swap_leading(at(top.h.data(), bu, s), y.data, t_steps, b, u);
  } else {
    backend.copy(at(top.h.data(), t_steps * bu, s), y.data, bu * s);
  }
}

void Lstm::backward(Backend& backend, const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                    Tensor* dx) {
  const int b = static_cast<int>(x.batch), t_steps = static_cast<int>(steps_);
  const int u = static_cast<int>(units_), tb = t_steps * b;
  const size_t s = act_size_, bu = static_cast<size_t>(b) * units_;
  // grad: the gradient reaching this level's outputs h_1..h_T, time-major; null when only
  // the last step has one (dy itself).
  std::byte* grad = nullptr;
  if (return_sequences_) {
    backend.swap_leading(dy.data, grad_a_.data(), b, t_steps, u);
    grad = grad_a_.data();
  }
  for (size_t l = levels_.size(); l-- > 0;) {
    Level& v = levels_[l];
    std::byte* dz = v.gx.data();  // the projection is not needed any more
    backend.fill_zero(dc_.data(), bu);
    for (int t = t_steps - 1; t >= 0; --t) {
      const void* dh = nullptr;
      if (t == t_steps - 1) {
        dh = grad != nullptr ? static_cast<const void*>(at(grad, t * bu, s)) : dy.data;
      } else {
        float beta = 0.0f;
        if (grad != nullptr) {
          backend.copy(at(grad, t * bu, s), dh_.data(), bu * s);
          beta = 1.0f;
        }
        // The recurrence: dh_t += dz_{t+1} * W_hh.
        backend.gemm(false, false, b, u, 4 * u, 1.0f, at(dz, (t + 1) * 4 * bu, s), v.w_hh, beta,
                     dh_.data());
        dh = dh_.data();
      }
      backend.lstm_backward_step(v.gates.data() + t * 4 * bu, v.c.data() + t * bu,
                                 t > 0 ? v.c.data() + (t - 1) * bu : nullptr, dh, dc_.data(),
                                 at(dz, t * 4 * bu, s), b, u);
    }
    const void* in = l == 0 ? static_cast<const void*>(xt_.data())
                            : static_cast<const void*>(at(levels_[l - 1].h.data(), bu, s));
    const int in_f = static_cast<int>(v.in);
    backend.gemm_f32_out(true, false, 4 * u, in_f, tb, 1.0f, dz, in, 0.0f, v.dw_ih);
    backend.gemm_f32_out(true, false, 4 * u, u, tb, 1.0f, dz, v.h.data(), 0.0f, v.dw_hh);
    backend.sum_rows(dz, v.db_ih, tb, 4 * u);
    backend.copy(v.db_ih, v.db_hh, static_cast<size_t>(4 * u) * sizeof(float));
    if (l > 0) {
      std::byte* below = grad == grad_a_.data() ? grad_b_.data() : grad_a_.data();
      backend.gemm(false, false, tb, in_f, 4 * u, 1.0f, dz, v.w_ih, 0.0f, below);
      grad = below;
    } else if (dx != nullptr) {
      backend.gemm(false, false, tb, in_f, 4 * u, 1.0f, dz, v.w_ih, 0.0f, dxt_.data());
      backend.swap_leading(dxt_.data(), dx->data, t_steps, b, in_f);
    }
  }
}

extern const LayerType kLstmLayer = {
    {"lstm",
     "long short-term memory over a sequence [steps, features] (an image: its rows), as "
     "PyTorch's nn.LSTM; outputs the last step's h, or every step's with return_sequences",
     {{"units", integer(1, INT_MAX), std::nullopt, "hidden units"},
      {"layers", integer(1, 64), int64_t{1}, "stacked LSTM layers"},
      {"return_sequences", flag(), false, "output every step's h, [steps, units]"}}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> {
      return std::make_unique<Lstm>(s.name, s.integer("units"), s.integer("layers"),
                                    s.flag("return_sequences"));
    }};

}  // namespace hpctrain
