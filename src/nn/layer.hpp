// The Layer interface. A layer owns no memory: the model hands it slices of the
// parameter and gradient arenas (bind) and preallocated activation buffers, so a
// training step allocates nothing. backward() overwrites parameter gradients.
#pragma once

#include <string>

#include "backend/backend.hpp"
#include "core/random.hpp"
#include "nn/tensor.hpp"

namespace hpctrain {

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual const char* type() const = 0;

  // Per-sample output shape for a per-sample input shape; throws UsageError if
  // the input does not fit. Called once at set-up, before param_count().
  virtual Dims output_dims(const Dims& input) = 0;
  virtual size_t param_count() const { return 0; }
  // Multiply-adds per sample in the forward pass (for inspect's FLOP count).
  virtual int64_t forward_macs() const { return 0; }

  // Gives the layer its slices of the parameter and gradient arenas.
  virtual void bind(float* /*params*/, float* /*grads*/) {}
  // Fills `host_params` (param_count() floats, host memory) with initial values.
  virtual void init_params(Rng& /*rng*/, float* /*host_params*/) {}

  virtual void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) = 0;
  // Given x, y (from forward) and dy, writes parameter gradients and, if dx is not
  // null, the input gradient.
  virtual void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                        Tensor* dx) = 0;

 private:
  std::string name_;
};

}  // namespace hpctrain
