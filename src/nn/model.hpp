// A sequential model: layers, the parameter and gradient arenas (one contiguous
// allocation each, in layer order, so one collective covers all gradients), the state
// arena (BatchNorm running statistics, likewise one allocation), and preallocated
// activations for the largest batch. Owns its device memory.
// Mixed precision: parameters, gradients and state are float32; activations are of the
// backend's act_type(), and with 16-bit activations the model keeps a compute copy of the
// parameters in that type (a third arena with the same offsets), converted from the
// float32 values before the first forward pass after they changed.
// Used from the training thread only.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "nn/layer.hpp"

namespace hpctrain {

// Told during Model::backward when gradients become final: after a layer's backward,
// every gradient at arena offset >= `offset` is written (layers run last to first).
class GradientListener {
 public:
  virtual void grads_final_from(size_t offset) = 0;

 protected:
  ~GradientListener() = default;
};

// What a model allocates, in elements, known from the shapes before anything is allocated.
struct ModelSize {
  size_t params = 0;       // parameters (and as many gradients)
  size_t state = 0;        // BatchNorm statistics and the like
  size_t activations = 0;  // layer outputs for the largest batch (and as many gradients)
};

class Model {
 public:
  // Shapes flow from `input_dims` through the layers; activations are sized for
  // `max_batch` samples. `check`, if given, sees the model's size once the shapes are known
  // and before anything is allocated, and may throw to refuse a model that cannot fit.
  Model(Backend& backend, std::vector<std::unique_ptr<Layer>> layers, const Dims& input_dims,
        int64_t max_batch, const std::function<void(const ModelSize&)>& check = {});

  Backend& backend() { return backend_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const Dims& input_dims() const { return input_dims_; }
  const Dims& output_dims() const { return dims_.back(); }
  const Dims& layer_output_dims(size_t layer) const { return dims_[layer]; }
  int64_t max_batch() const { return max_batch_; }

  size_t param_count() const { return param_count_; }
  const float* params() const { return params_.data(); }
  // For writing the parameters (the optimizer, collectives): the compute copy is refreshed
  // before the next forward pass.
  float* mutable_params() {
    weights_stale_ = true;
    return params_.data();
  }
  float* grads() { return grads_.data(); }
  // Offset of layer i's parameters in the arenas.
  size_t param_offset(size_t layer) const { return offsets_[layer]; }

  // Model state (Layer::state_count), in layer order; empty for most models.
  size_t state_count() const { return state_count_; }
  // The name of the first batchnorm (a part of a composite layer included) to which a
  // training batch of `batch` samples gives one value per channel; empty if none.
  std::string batchnorm_with_one_value(int64_t batch) const;
  float* state() { return state_.data(); }
  size_t state_offset(size_t layer) const { return state_offsets_[layer]; }

  // Initialises all parameters and the state from `seed` (the same on every rank).
  void init_params(uint64_t seed);
  // Copies parameters to/from host memory (param_count() floats).
  void get_params(float* host) const;
  void set_params(const float* host);
  // Copies the state to/from host memory (state_count() floats).
  void get_state(float* host) const;
  void set_state(const float* host);

  // Forward pass over `batch` samples at `input` (device memory); returns the logits.
  // In training, `seed` seeds the step's random draws (dropout): pass a different one
  // per step and rank.
  const Tensor& forward(const void* input, int64_t batch, bool training, uint64_t seed = 0);
  // Buffer the loss writes d(loss)/d(logits) into before backward().
  void* dlogits() { return d_views_.back().data; }
  // Backward pass of the last forward(); fills grads(), telling `listener` (if any) as
  // the layers finish.
  void backward(GradientListener* listener = nullptr);

  // Per-layer timing hooks for the passes that follow, and the composite layers' parts'
  // (Layer::set_part_clock); nullptr (the default) for none.
  void set_layer_clock(StepClock* clock, StepClock* parts = nullptr) {
    clock_ = clock;
    for (auto& l : layers_) l->set_part_clock(parts);
  }

  // What must not change when a run resumes: the input shape and, per layer, its
  // name, type, parameter count, state count (if any), output shape and attributes; one
  // line each ("input 1x28x28", "layer dense0 dense params=150720 out=192",
  // "layer conv0 conv2d params=320 out=32x28x28 k=3x3 s=1x1 p=1x1 bias",
  // "layer bn0 batchnorm params=64 state=64 out=32x28x28 eps=1e-05 momentum=0.1").
  std::string architecture() const;

  // SHA-256 of the float32 parameters in layer order, as lowercase hex.
  std::string params_sha256() const;
  // Calls `visit` on the parameters in order: in place in host memory, else in host copies
  // of at most 4 MiB (no second copy of a large model at the end of an epoch, of a run).
  void visit_params(const std::function<void(const float*, size_t)>& visit) const;

 private:
  // Layers compute with a copy of the weights in the activations' type and layout (16-bit,
  // or filters KRSC for channels last), refreshed from the parameters once per step.
  bool needs_compute_copy() const {
    return backend_.act_type() != DType::kF32 || backend_.channels_last();
  }

  Backend& backend_;
  std::vector<std::unique_ptr<Layer>> layers_;
  Dims input_dims_;
  std::vector<Dims> dims_;  // dims_[i]: output of layer i
  int64_t max_batch_;
  size_t param_count_ = 0;
  std::vector<size_t> offsets_;
  DeviceArray<float> params_, grads_;
  DeviceArray<std::byte> weights_;  // compute copy (needs_compute_copy)
  bool weights_stale_ = true;
  size_t state_count_ = 0;
  std::vector<size_t> state_offsets_;
  DeviceArray<float> state_;
  std::vector<DeviceArray<std::byte>> acts_, d_acts_;  // empty for view layers
  // Channels-last backends: the input moved into NHWC order for the first layer, and the
  // filters whose compute copy is KRSC. Per layer that reads NCHW only (dense, flatten)
  // from an NHWC activation, its input in NCHW order and the gradient before it goes back
  // to NHWC (empty elsewhere).
  DeviceArray<std::byte> input_nhwc_;
  std::vector<FilterSpec> filters_;
  std::vector<DeviceArray<std::byte>> nchw_in_, nchw_d_in_;
  size_t first_compute_ = 0;  // index of the first non-view layer
  StepClock* clock_ = nullptr;
  DeviceArray<std::byte> workspace_;  // shared scratch (Layer::workspace_bytes)
  Tensor input_;
  std::vector<Tensor> out_views_, d_views_;        // per-layer views, batch set per call
  std::vector<Tensor> nchw_views_, nchw_d_views_;  // over nchw_in_, nchw_d_in_
};

}  // namespace hpctrain
