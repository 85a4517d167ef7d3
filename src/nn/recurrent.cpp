// LSTM and GRU forward and backward (recurrent.hpp): time-major buffers, GEMMs for the
// projections and the recurrence, the backend's point-wise steps for the gates.
#include "nn/recurrent.hpp"

#include <climits>
#include <cmath>

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {
namespace {

// `elems` activations of `size` bytes past p.
std::byte* at(std::byte* p, size_t elems, size_t size) { return p + elems * size; }
const std::byte* at(const std::byte* p, size_t elems, size_t size) { return p + elems * size; }

}  // namespace

Dims Recurrent::output_dims(const Dims& input) {
  if (input.size() < 2) {
    throw UsageError(std::string(type()) + " " + name() +
                     ": its input is not a sequence; it needs [steps, features] (an image "
                     "reads its rows as steps)");
  }
  features_ = input.back();
  steps_ = 1;
  for (size_t i = 0; i + 1 < input.size(); ++i) steps_ *= input[i];
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

size_t Recurrent::param_count() const {
  size_t n = 0;
  for (const Level& v : levels_) n += level_params(v.in);
  return n;
}

int64_t Recurrent::forward_macs() const {
  int64_t macs = 0;
  for (const Level& v : levels_) macs += steps_ * gates_ * units_ * (v.in + units_);
  return macs;
}

std::string Recurrent::attributes() const {
  return "layers=" + std::to_string(layers_) + (return_sequences_ ? " sequences" : " last");
}

void Recurrent::allocate(Backend& backend, int64_t max_batch) {
  act_size_ = dtype_size(backend.act_type());
  const size_t tb = static_cast<size_t>(steps_ * max_batch), b = static_cast<size_t>(max_batch);
  const size_t u = static_cast<size_t>(units_), g = static_cast<size_t>(gates_);
  const size_t f = static_cast<size_t>(features_);
  xt_ = DeviceArray<std::byte>(backend, tb * f * act_size_);
  dxt_ = DeviceArray<std::byte>(backend, tb * f * act_size_);
  plan_ = backend.plan_rnn({.lstm = cell_ == Cell::kLstm,
                            .input = static_cast<int>(features_),
                            .units = static_cast<int>(units_),
                            .layers = static_cast<int>(layers_),
                            .steps = static_cast<int>(steps_),
                            .max_batch = static_cast<int>(max_batch)});
  if (plan_ != nullptr) {
    yt_ = DeviceArray<std::byte>(backend, tb * u * act_size_);
    dyt_ = DeviceArray<std::byte>(backend, (tb * u * act_size_ + 3) / 4 * 4);
    return;
  }
  for (Level& v : levels_) {
    v.gx = DeviceArray<std::byte>(backend, tb * g * u * act_size_);
    v.h = DeviceArray<std::byte>(backend, (tb + b) * u * act_size_);  // [h_{-1}, h_0..h_{T-1}]
    v.gates = DeviceArray<float>(backend, tb * g * u);
    v.cell = DeviceArray<float>(backend, tb * u);
  }
  gh_ = DeviceArray<std::byte>(backend, b * g * u * act_size_);
  dh_a_ = DeviceArray<std::byte>(backend, b * u * act_size_);
  dh_b_ = DeviceArray<std::byte>(backend, b * u * act_size_);
  dc_ = DeviceArray<float>(backend, cell_ == Cell::kLstm ? b * u : 0);
  dgh_ = DeviceArray<std::byte>(backend, cell_ == Cell::kGru ? tb * g * u * act_size_ : 0);
  grad_a_ = DeviceArray<std::byte>(backend, tb * u * act_size_);
  grad_b_ = DeviceArray<std::byte>(backend, layers_ > 1 ? tb * u * act_size_ : 0);
}

void Recurrent::bind(const ParamSlice& p) {
  params_ = p;
  const size_t gu = static_cast<size_t>(gates_ * units_), u = static_cast<size_t>(units_);
  for (Level& v : levels_) {
    const size_t in = static_cast<size_t>(v.in);
    const ParamSlice s = p.from(v.offset);
    v.w_ih = s.weights_at(0);
    v.w_hh = s.weights_at(gu * in);
    v.b_ih = s.params + gu * (in + u);
    v.b_hh = v.b_ih + gu;
    v.dw_ih = s.grads;
    v.dw_hh = s.grads + gu * in;
    v.db_ih = s.grads + gu * (in + u);
    v.db_hh = v.db_ih + gu;
  }
}

void Recurrent::init_params(Rng& rng, float* host_params) {
  // PyTorch's default: every weight and bias uniform in +-1/sqrt(units).
  const double k = 1.0 / std::sqrt(static_cast<double>(units_));
  const size_t n = param_count();
  for (size_t i = 0; i < n; ++i) host_params[i] = static_cast<float>((2 * rng.uniform() - 1) * k);
}

void Recurrent::forward_plan(Backend& backend, const Tensor& x, Tensor& y, bool training) {
  const int b = static_cast<int>(x.batch), t_steps = static_cast<int>(steps_);
  const int u = static_cast<int>(units_);
  const size_t s = act_size_, bu = static_cast<size_t>(b) * units_;
  backend.swap_leading(x.data, xt_.data(), b, t_steps, static_cast<int>(features_));
  plan_->forward(params_.weights, xt_.data(), yt_.data(), b, training);
  if (return_sequences_) {
    backend.swap_leading(yt_.data(), y.data, t_steps, b, u);
  } else {
    backend.copy(at(yt_.data(), (t_steps - 1) * bu, s), y.data, bu * s);
  }
}

void Recurrent::backward_plan(Backend& backend, const Tensor& x, const Tensor& dy, Tensor* dx) {
  const int b = static_cast<int>(x.batch), t_steps = static_cast<int>(steps_);
  const int u = static_cast<int>(units_);
  const size_t s = act_size_, bu = static_cast<size_t>(b) * units_;
  if (return_sequences_) {
    backend.swap_leading(dy.data, dyt_.data(), b, t_steps, u);
  } else {  // only the last step's output has a gradient
    backend.fill_zero(reinterpret_cast<float*>(dyt_.data()), (t_steps * bu * s + 3) / 4);
    backend.copy(dy.data, at(dyt_.data(), (t_steps - 1) * bu, s), bu * s);
  }
  plan_->backward(xt_.data(), yt_.data(), dyt_.data(), dxt_.data(), params_.grads, b);
  if (dx != nullptr) {
    backend.swap_leading(dxt_.data(), dx->data, t_steps, b, static_cast<int>(features_));
  }
}

void Recurrent::forward(Backend& backend, const Tensor& x, Tensor& y, bool training) {
  if (plan_ != nullptr) {
    forward_plan(backend, x, y, training);
    return;
  }
  const int b = static_cast<int>(x.batch), t_steps = static_cast<int>(steps_);
  const int u = static_cast<int>(units_), gu = static_cast<int>(gates_ * units_);
  const size_t s = act_size_, bu = static_cast<size_t>(b) * units_;
  const size_t bg = static_cast<size_t>(gates_) * bu;
  backend.swap_leading(x.data, xt_.data(), b, t_steps, static_cast<int>(features_));
  const void* in = xt_.data();
  for (Level& v : levels_) {
    // All steps' inputs onto the gates: gx[T*B, G*u] = in[T*B, in] * W_ih^T.
    backend.gemm(false, true, t_steps * b, gu, static_cast<int>(v.in), 1.0f, in, v.w_ih, 0.0f,
                 v.gx.data());
    for (int t = 0; t < t_steps; ++t) {
      const void* h_prev = t > 0 ? at(v.h.data(), t * bu, s) : nullptr;
      const void* gh = nullptr;
      if (t > 0) {
        backend.gemm(false, true, b, gu, u, 1.0f, h_prev, v.w_hh, 0.0f, gh_.data());
        gh = gh_.data();
      }
      void* h = at(v.h.data(), (t + 1) * bu, s);
      if (cell_ == Cell::kLstm) {
        backend.lstm_forward_step(at(v.gx.data(), t * bg, s), gh, v.b_ih, v.b_hh,
                                  t > 0 ? v.cell.data() + (t - 1) * bu : nullptr,
                                  v.gates.data() + t * bg, v.cell.data() + t * bu, h, b, u);
      } else {
        backend.gru_forward_step(at(v.gx.data(), t * bg, s), gh, v.b_ih, v.b_hh, h_prev,
                                 v.gates.data() + t * bg, v.cell.data() + t * bu, h, b, u);
      }
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

void Recurrent::backward_steps(Backend& backend, Level& v, const std::byte* grad, const void* last,
                               int b) {
  const int t_steps = static_cast<int>(steps_), u = static_cast<int>(units_);
  const int gu = static_cast<int>(gates_ * units_);
  const size_t s = act_size_, bu = static_cast<size_t>(b) * units_;
  const size_t bg = static_cast<size_t>(gates_) * bu;
  std::byte* dz = v.gx.data();  // the projection is not needed any more
  if (cell_ == Cell::kLstm) backend.fill_zero(dc_.data(), bu);
  for (int t = t_steps - 1; t >= 0; --t) {
    const void* dh = nullptr;
    if (t == t_steps - 1) {
      dh = grad != nullptr ? static_cast<const void*>(grad + t * bu * s) : last;
    } else if (cell_ == Cell::kLstm) {
      float beta = 0.0f;
      if (grad != nullptr) {
        backend.copy(grad + t * bu * s, dh_a_.data(), bu * s);
        beta = 1.0f;
      }
      // The recurrence: dh_t += dz_{t+1} * W_hh.
      backend.gemm(false, false, b, u, gu, 1.0f, at(dz, (t + 1) * bg, s), v.w_hh, beta,
                   dh_a_.data());
      dh = dh_a_.data();
    } else {
      // dh_a holds step t+1's gradient for h_t that bypasses W_hh; add the recurrence.
      backend.gemm(false, false, b, u, gu, 1.0f, at(dgh_.data(), (t + 1) * bg, s), v.w_hh, 1.0f,
                   dh_a_.data());
      if (grad != nullptr) backend.add(dh_a_.data(), grad + t * bu * s, dh_a_.data(), bu);
      dh = dh_a_.data();
    }
    if (cell_ == Cell::kLstm) {
      backend.lstm_backward_step(v.gates.data() + t * bg, v.cell.data() + t * bu,
                                 t > 0 ? v.cell.data() + (t - 1) * bu : nullptr, dh, dc_.data(),
                                 at(dz, t * bg, s), b, u);
    } else {
      // dh may be dh_a: the step reads each element before it writes the same one.
      backend.gru_backward_step(v.gates.data() + t * bg, v.cell.data() + t * bu,
                                t > 0 ? at(v.h.data(), t * bu, s) : nullptr, dh, at(dz, t * bg, s),
                                at(dgh_.data(), t * bg, s), t > 0 ? dh_a_.data() : nullptr, b, u);
    }
  }
}

void Recurrent::backward(Backend& backend, const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                         Tensor* dx) {
  if (plan_ != nullptr) {
    backward_plan(backend, x, dy, dx);
    return;
  }
  const int b = static_cast<int>(x.batch), t_steps = static_cast<int>(steps_);
  const int u = static_cast<int>(units_), tb = t_steps * b;
  const int gu = static_cast<int>(gates_ * units_);
  const size_t s = act_size_, bu = static_cast<size_t>(b) * units_;
  const size_t bg = static_cast<size_t>(gates_) * bu;
  // grad: the gradient reaching this level's outputs h_1..h_T, time-major; null when only
  // the last step has one (dy itself).
  std::byte* grad = nullptr;
  if (return_sequences_) {
    backend.swap_leading(dy.data, grad_a_.data(), b, t_steps, u);
    grad = grad_a_.data();
  }
  for (size_t l = levels_.size(); l-- > 0;) {
    Level& v = levels_[l];
    backward_steps(backend, v, grad, dy.data, b);
    const std::byte* dz = v.gx.data();
    const std::byte* dgh = cell_ == Cell::kLstm ? dz : dgh_.data();
    const void* in = l == 0 ? static_cast<const void*>(xt_.data())
                            : static_cast<const void*>(at(levels_[l - 1].h.data(), bu, s));
    const int in_f = static_cast<int>(v.in);
    backend.gemm_f32_out(true, false, gu, in_f, tb, 1.0f, dz, in, 0.0f, v.dw_ih);
    // dW_hh = sum over t >= 1 of dgh_t^T h_{t-1}: h_{-1} = 0 adds nothing. v.h's first
    // block is not read: a smaller batch's forward leaves its own steps there.
    if (t_steps > 1) {
      backend.gemm_f32_out(true, false, gu, u, tb - b, 1.0f, at(dgh, bg, s), at(v.h.data(), bu, s),
                           0.0f, v.dw_hh);
    } else {
      backend.fill_zero(v.dw_hh, static_cast<size_t>(gu) * u);
    }
    backend.sum_rows(dz, v.db_ih, tb, gu);
    if (cell_ == Cell::kLstm) {
      backend.copy(v.db_ih, v.db_hh, static_cast<size_t>(gu) * sizeof(float));
    } else {
      backend.sum_rows(dgh, v.db_hh, tb, gu);
    }
    if (l > 0) {
      std::byte* below = grad == grad_a_.data() ? grad_b_.data() : grad_a_.data();
      backend.gemm(false, false, tb, in_f, gu, 1.0f, dz, v.w_ih, 0.0f, below);
      grad = below;
    } else if (dx != nullptr) {
      backend.gemm(false, false, tb, in_f, gu, 1.0f, dz, v.w_ih, 0.0f, dxt_.data());
      backend.swap_leading(dxt_.data(), dx->data, t_steps, b, in_f);
    }
  }
}

namespace {

const std::vector<LayerKeyDecl> kRecurrentKeys = {
    {"units", integer(1, INT_MAX), std::nullopt, "hidden units"},
    {"layers", integer(1, 64), int64_t{1}, "stacked layers"},
    {"return_sequences", flag(), false, "output every step's h, [steps, units]"}};

template <Recurrent::Cell C>
std::unique_ptr<Layer> build_recurrent(const LayerSpec& s) {
  return std::make_unique<Recurrent>(s.name, C, s.integer("units"), s.integer("layers"),
                                     s.flag("return_sequences"));
}

}  // namespace

extern const LayerType kLstmLayer = {
    {"lstm",
     "long short-term memory over a sequence [steps, features] (an image: its rows), as "
     "PyTorch's nn.LSTM; outputs the last step's h, or every step's with return_sequences",
     kRecurrentKeys},
    build_recurrent<Recurrent::Cell::kLstm>};

extern const LayerType kGruLayer = {
    {"gru",
     "gated recurrent unit over a sequence [steps, features] (an image: its rows), as "
     "PyTorch's nn.GRU; outputs the last step's h, or every step's with return_sequences",
     kRecurrentKeys},
    build_recurrent<Recurrent::Cell::kGru>};

}  // namespace hpctrain
