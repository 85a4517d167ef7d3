// Recurrent layers as PyTorch's nn.LSTM and nn.GRU (batch_first; LSTM gates i, f, g, o,
// GRU gates r, z, n; per layer weight_ih [G units, in], weight_hh [G units, units],
// bias_ih [G units], bias_hh [G units], in that order, G = 4 or 3), with backpropagation
// through the whole sequence. The input is a sequence of T steps of F features: [T, F], or
// any [..., F] whose leading dims multiply to T (an image [1, H, W] is H steps of W
// features: sequential Fashion-MNIST). The output is the last layer's last h [units], or
// with return_sequences every step's [T, units].
//
// Inside, sequences are time-major ([T][batch][...]) so that every step's rows are
// contiguous: one GEMM projects all steps' inputs onto the gates, one GEMM per step adds
// the recurrence, and the backend's lstm_/gru_forward_step does the point-wise rest.
// Backward runs the steps in reverse (lstm_/gru_backward_step and a GEMM per step for the
// gradient reaching h), then one GEMM each for the input weights, the recurrent weights
// and the input gradient. A backend that runs the whole stack itself (Backend::plan_rnn:
// cuDNN's RNN API) gets the time-major sequences instead.
#pragma once

#include <memory>
#include <vector>

#include "nn/layer.hpp"

namespace hpctrain {

class Recurrent final : public Layer {
 public:
  enum class Cell { kLstm, kGru };
  Recurrent(std::string name, Cell cell, int64_t units, int64_t layers, bool return_sequences)
      : Layer(std::move(name)),
        cell_(cell),
        gates_(cell == Cell::kLstm ? 4 : 3),
        units_(units),
        layers_(layers),
        return_sequences_(return_sequences) {}
  const char* type() const override { return cell_ == Cell::kLstm ? "lstm" : "gru"; }

  Dims output_dims(const Dims& input) override;
  size_t param_count() const override;
  int64_t forward_macs() const override;
  std::string attributes() const override;
  void allocate(Backend& backend, int64_t max_batch) override;
  void bind(const ParamSlice& p) override;
  void init_params(Rng& rng, float* host_params) override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

 private:
  // One layer of the stack: its parameters and what forward keeps for backward.
  struct Level {
    int64_t in = 0;                               // features of its input
    size_t offset = 0;                            // of its parameters in the layer's slice
    const void *w_ih = nullptr, *w_hh = nullptr;  // compute copies
    const float *b_ih = nullptr, *b_hh = nullptr;
    float *dw_ih = nullptr, *dw_hh = nullptr, *db_ih = nullptr, *db_hh = nullptr;
    DeviceArray<std::byte> gx;  // [T][B][G units] input projection; its gradient in backward
    DeviceArray<std::byte> h;   // [T + 1][B][units]; step 0 is h0 = 0
    DeviceArray<float> gates;   // [T][B][G units], activated
    DeviceArray<float> cell;    // [T][B][units]: the LSTM's c, the GRU's W_hn h + b_hn
  };
  size_t level_params(int64_t in) const {
    return static_cast<size_t>(gates_ * units_ * (in + units_) + 2 * gates_ * units_);
  }
  // Backward of one level's steps, given the gradient reaching its outputs (time-major,
  // or null when only the last step has one: last); leaves dL/dz of the input projection
  // in v.gx and, for the GRU, of the recurrent one in dgh_.
  void backward_steps(Backend& backend, Level& v, const std::byte* grad, const void* last,
                      int batch);

  // The backend's run of the stack: forward and backward of the time-major sequences.
  void forward_plan(Backend& backend, const Tensor& x, Tensor& y, bool training);
  void backward_plan(Backend& backend, const Tensor& x, const Tensor& dy, Tensor* dx);

  Cell cell_;
  int64_t gates_, units_, layers_;
  bool return_sequences_;
  int64_t steps_ = 0, features_ = 0;
  size_t act_size_ = sizeof(float);
  std::vector<Level> levels_;
  DeviceArray<std::byte> xt_, gh_, dh_a_, dh_b_, grad_a_, grad_b_, dxt_, dgh_;
  DeviceArray<float> dc_;
  // With a plan, levels_ only place the parameters: the plan keeps what backward needs.
  std::unique_ptr<RnnPlan> plan_;
  ParamSlice params_;                // the stack's
  DeviceArray<std::byte> yt_, dyt_;  // [T][B][units]; dyt_ rounded up to whole floats
};

}  // namespace hpctrain
