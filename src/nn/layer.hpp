// The Layer interface. The model hands a layer slices of the parameter, gradient and
// state arenas (bind, bind_state), preallocated activation buffers and a shared scratch
// workspace; a layer allocates only what must survive from forward() to backward() (batch
// statistics, dropout masks), once, in allocate(). So a training step allocates nothing.
// backward() overwrites parameter gradients.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/random.hpp"
#include "nn/tensor.hpp"

namespace hpctrain {

// A layer's slices of the model's parameter arenas, all at the same offsets: the float32
// values the optimizer updates, their float32 gradients, and the compute copy of the
// values in the backend's activation type that matrix products and convolutions read (the
// values themselves for float32 activations). Biases and normalisation parameters are
// read from `params`, in float32.
struct ParamSlice {
  float* params = nullptr;
  float* grads = nullptr;
  const std::byte* weights = nullptr;
  size_t weight_size = sizeof(float);  // bytes per value of the compute copy

  // float32 activations: the compute copy is the values themselves.
  static ParamSlice f32(float* params, float* grads) {
    return {params, grads, reinterpret_cast<const std::byte*>(params), sizeof(float)};
  }

  const void* weights_at(size_t offset) const { return weights + offset * weight_size; }
  // The slice from `offset` values on.
  ParamSlice from(size_t offset) const {
    return {params + offset, grads + offset, weights + offset * weight_size, weight_size};
  }
};

// A convolution filter inside a layer's parameters: k x c x rs float32 values (KCRS) at
// `offset` in the parameter arena; a channels-last backend reads its compute copy KRSC.
struct FilterSpec {
  size_t offset;
  int k, c, rs;
};

// Told before and after each timed piece of a training step runs, while set: a model's
// layers (Model::set_layer_clock; index: the layer's) or a composite layer's parts
// (Layer::set_part_clock; index: into its sublayers()). `hpctrain inspect --time` times
// with it. A part fused with what follows it (a batch normalisation with its ReLU and
// residual addition) is timed with it.
class StepClock {
 public:
  virtual void start(size_t index, bool backward) = 0;
  virtual void stop(size_t index, bool backward) = 0;

 protected:
  ~StepClock() = default;
};

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

  // Hyper-parameters that shape the computation beyond the parameter count and output
  // shape ("k=3x3 s=1x1 p=1x1"), recorded in the model's architecture so that a checkpoint
  // is not resumed into a layer that computes something else; empty if none.
  virtual std::string attributes() const { return ""; }

  // Scratch bytes forward()/backward() need for batches of up to max_batch samples (after
  // output_dims()). The model allocates one buffer for the largest request of all layers
  // and gives it to each with set_workspace() once: layers run one at a time, so they
  // share it, and nothing in it survives from forward() to backward().
  virtual size_t workspace_bytes(Backend& /*backend*/, int64_t /*max_batch*/) const { return 0; }
  virtual void set_workspace(void* workspace) { workspace_ = workspace; }

  // Allocates the layer's own buffers for batches of up to max_batch samples (after
  // output_dims()).
  virtual void allocate(Backend& /*backend*/, int64_t /*max_batch*/) {}

  // Layers a composite layer runs inside itself, in parameter order (for inspect).
  virtual std::vector<const Layer*> sublayers() const { return {}; }
  // A composite layer tells `clock` about its parts (indices into sublayers()); nullptr
  // for none.
  virtual void set_part_clock(StepClock* /*clock*/) {}

  // A view's output is its input with other dims (same elements in the same order): the
  // model points the output and its gradient at the input's buffers instead of allocating.
  virtual bool is_view() const { return false; }

  // True when the layer computes on activations with channels in either layout
  // (Backend::channels_last): through backend operations that know the layout, or element
  // by element. The model gives other layers (dense, flatten) such inputs in NCHW order.
  virtual bool any_layout() const { return false; }
  // Appends the layer's convolution filters, its parameters starting at `offset`.
  virtual void filters(size_t /*offset*/, std::vector<FilterSpec>& /*out*/) const {}

  // Gives the layer its slices of the parameter arenas.
  virtual void bind(const ParamSlice& /*p*/) {}
  // Fills `host_params` (param_count() floats, host memory) with initial values.
  virtual void init_params(Rng& /*rng*/, float* /*host_params*/) {}

  // Model state: values forward() updates in training and uses in evaluation, that are
  // not trained by gradients (BatchNorm's running mean and variance). Saved in
  // checkpoints; the trainer averages it over the ranks before it is saved or used.
  virtual size_t state_count() const { return 0; }
  virtual void bind_state(float* /*state*/) {}
  // Fills `host_state` (state_count() floats, host memory) with initial values.
  virtual void init_state(float* /*host_state*/) {}

  // Seed of this training step's random draws (dropout masks); the model sets it before
  // each training forward().
  virtual void set_rng_seed(uint64_t /*seed*/) {}
  // True when a training forward() draws from that seed (a replayed CUDA graph could not
  // give it a new one).
  virtual bool draws_random() const { return false; }

  virtual void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) = 0;
  // Given x, y (from forward) and dy, writes parameter gradients and, if dx is not
  // null, the input gradient. dy is the layer's to overwrite: nothing reads it after.
  virtual void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                        Tensor* dx) = 0;

 protected:
  void* workspace() const { return workspace_; }

 private:
  std::string name_;
  void* workspace_ = nullptr;
};

}  // namespace hpctrain
