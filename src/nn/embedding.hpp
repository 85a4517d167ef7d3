// Embedding: a sequence of T token ids becomes T rows of a trained table [vocab, dim], as
// PyTorch's nn.Embedding (N(0, 1) initialisation). The ids arrive as the values of
// activations (3.0 is id 3; token data are samples [1, 1, T], any dims whose product is T
// will do) and the output is [T, dim]: a sequence that lstm and gru layers read step by
// step and a per_step dense layer row by row. No gradient reaches the ids.
//
// vocab 0 stands for the data's vocab_size: the model's builder calls fit_vocab() with it
// before output_dims(). The activation type must hold every id exactly: fit_vocab() refuses
// a vocabulary beyond 256 ids in bfloat16, 2048 in float16 (2^24 in float32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nn/layer.hpp"

namespace hpctrain {

class Embedding final : public Layer {
 public:
  // vocab >= 0 (0: fit_vocab() sets it), dim >= 1.
  Embedding(std::string name, int64_t vocab, int64_t dim);
  const char* type() const override { return "embedding"; }

  // Fits the table to data whose ids are in [0, data_vocab) in activations of type
  // `act_type`: a vocab of 0 becomes data_vocab; a given vocab smaller than it, or a vocab
  // whose ids `act_type` does not hold exactly, throws UsageError ("embedding 'e' has vocab
  // 50 but the data's vocab_size is 65"; the model's builder names the config key).
  void fit_vocab(int64_t data_vocab, DType act_type);
  int64_t vocab() const { return vocab_; }
  int64_t dim() const { return dim_; }

  // Throws UsageError while the vocab is still 0.
  Dims output_dims(const Dims& input) override;
  size_t param_count() const override { return static_cast<size_t>(vocab_ * dim_); }
  // A lookup copies rows: no multiply-adds (its cost is memory traffic, T x dim values).
  int64_t forward_macs() const override { return 0; }
  // Fails (an internal error) when the backend's activation type cannot hold every id
  // exactly: fit_vocab() refuses that first.
  void allocate(Backend& backend, int64_t max_batch) override;
  void bind(const ParamSlice& p) override;
  void init_params(Rng& rng, float* host_params) override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  // Writes the table's gradient; dx, if asked for, is zero (ids take no gradient).
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

 private:
  int64_t vocab_, dim_;
  int64_t steps_ = 0;            // T: ids per sample
  const void* table_ = nullptr;  // the table's compute copy
  float* dtable_ = nullptr;
  DeviceArray<std::byte> zeros_;  // a zero input gradient for the largest batch
};

}  // namespace hpctrain
