// LSTM layers as PyTorch's nn.LSTM (batch_first, gates i, f, g, o; per layer weight_ih
// [4 units, in], weight_hh [4 units, units], bias_ih [4 units], bias_hh [4 units], in that
// order), with backpropagation through the whole sequence. The input is a sequence of T
// steps of F features: [T, F], or any [..., F] whose leading dims multiply to T (an image
// [1, H, W] is H steps of W features: sequential Fashion-MNIST). The output is the last
// layer's last h [units], or with return_sequences every step's [T, units].
//
// Inside, sequences are time-major ([T][batch][...]) so that every step's rows are
// contiguous: one GEMM projects all steps' inputs onto the four gates, one GEMM per step
// adds the recurrence, and Backend::lstm_forward_step does the point-wise rest. Backward
// runs the steps in reverse with Backend::lstm_backward_step, then one GEMM each for the
// input weights, the recurrent weights and the input gradient.
#pragma once

#include <vector>

#include "nn/layer.hpp"

namespace hpctrain {

class Lstm final : public Layer {
 public:
  Lstm(std::string name, int64_t units, int64_t layers, bool return_sequences)
      : Layer(std::move(name)),
        units_(units),
        layers_(layers),
        return_sequences_(return_sequences) {}
  const char* type() const override { return "lstm"; }

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
    DeviceArray<std::byte> gx;    // [T][B][4 units] input projection; dL/dz in backward
    DeviceArray<std::byte> h;     // [T + 1][B][units]; step 0 is h0 = 0
    DeviceArray<float> c, gates;  // [T][B][units], [T][B][4 units]
  };
  size_t level_params(int64_t in) const {
    return static_cast<size_t>(4 * units_ * (in + units_) + 8 * units_);
  }

  int64_t units_, layers_;
  bool return_sequences_;
  int64_t steps_ = 0, features_ = 0;
  size_t act_size_ = sizeof(float);
  std::vector<Level> levels_;
  DeviceArray<std::byte> xt_, gh_, dh_, grad_a_, grad_b_, dxt_;
  DeviceArray<float> dc_;
};

}  // namespace hpctrain
