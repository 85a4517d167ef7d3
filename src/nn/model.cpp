// Sequential model: shape inference, arena layout, forward and backward sweeps.
#include "nn/model.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <utility>

#include "core/error.hpp"
#include "core/sha256.hpp"
#include "nn/alloc_error.hpp"
#include "nn/batchnorm.hpp"
#include "nn/relu.hpp"

namespace hpctrain {
namespace {

// Per-sample [c, h, w] with more than one channel and more than one cell: stored
// differently in NCHW and NHWC order.
bool has_channel_layout(const Dims& d) { return d.size() == 3 && d[0] > 1 && d[1] * d[2] > 1; }

std::pair<int, int> channels_and_plane(const Dims& d) {
  return {static_cast<int>(d[0]), static_cast<int>(d[1] * d[2])};
}

// Runs `allocate`; a std::bad_alloc in it becomes an AllocationFailed naming `what` (the
// memory check before allocation counts parameters and activations, not every buffer).
template <typename F>
void allocating(const std::string& what, F&& allocate) {
  try {
    allocate();
  } catch (const AllocationFailed&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw AllocationFailed(what);
  }
}

std::string byte_text(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

}  // namespace

Model::Model(Backend& backend, std::vector<std::unique_ptr<Layer>> layers, const Dims& input_dims,
             int64_t max_batch, const std::function<void(const ModelSize&)>& check)
    : backend_(backend),
      layers_(std::move(layers)),
      input_dims_(input_dims),
      max_batch_(max_batch) {
  HT_REQUIRE(!layers_.empty(), "a model needs at least one layer");
  HT_REQUIRE(max_batch_ >= 1, "max_batch must be >= 1");
  // 1. Shapes and arena offsets.
  Dims dims = input_dims_;
  for (auto& layer : layers_) {
    dims = layer->output_dims(dims);
    dims_.push_back(dims);
    offsets_.push_back(param_count_);
    param_count_ += layer->param_count();
    state_offsets_.push_back(state_count_);
    state_count_ += layer->state_count();
  }
  // A BatchNorm followed by a ReLU runs as one operation (Backend::batchnorm_add_relu_*):
  // the ReLU becomes a view of the BatchNorm's output.
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    auto* bn = dynamic_cast<BatchNorm*>(layers_[i].get());
    auto* relu = dynamic_cast<Relu*>(layers_[i + 1].get());
    if (bn != nullptr && relu != nullptr) {
      bn->fuse_relu();
      relu->absorb();
    }
  }
  if (check) {
    ModelSize size{param_count_, state_count_, 0};
    for (const Dims& d : dims_) {
      size_t elems = static_cast<size_t>(max_batch_);
      for (int64_t x : d) elems *= static_cast<size_t>(x);
      size.activations += elems;
    }
    check(size);
  }
  // 2. One allocation for all parameters, one for all gradients.
  const size_t act_size = dtype_size(backend_.act_type());
  allocating("the parameters and their gradients (" + std::to_string(param_count_) + " values)",
             [&] {
               params_ = DeviceArray<float>(backend_, param_count_);
               grads_ = DeviceArray<float>(backend_, param_count_);
               state_ = DeviceArray<float>(backend_, state_count_);
               if (needs_compute_copy()) {
                 weights_ = DeviceArray<std::byte>(backend_, param_count_ * act_size);
               }
             });
  ParamSlice arenas{params_.data(), grads_.data(), reinterpret_cast<std::byte*>(params_.data()),
                    act_size};
  if (needs_compute_copy()) arenas.weights = weights_.data();
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->bind(arenas.from(offsets_[i]));
    layers_[i]->bind_state(state_.data() + state_offsets_[i]);
    allocating("the buffers of layer " + layers_[i]->name(),
               [&] { layers_[i]->allocate(backend_, max_batch_); });
  }
  // 3. Activations and their gradients for the largest batch. A view layer shares its
  // input's buffers: its output data pointer is set in forward() (the model input changes
  // per call), its gradient is the previous layer's gradient buffer (or its own NCHW one).
  // Channels last, activations with channels are NHWC from the model input on (moved at
  // the start of forward()) as far as layers of any layout reach; a layer that reads NCHW
  // only gets its input and gradient through buffers of its own.
  auto act_bytes = [&](const Dims& d) {
    return static_cast<size_t>(max_batch_ * dims_elems(d)) * act_size;
  };
  const bool channels_last = backend_.channels_last();
  // (An input of one channel reads the same in both orders.)
  bool nhwc = channels_last && layers_[0]->any_layout();
  if (nhwc && has_channel_layout(input_dims_)) {
    input_nhwc_ = DeviceArray<std::byte>(backend_, act_bytes(input_dims_));
  }
  if (channels_last) {
    for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->filters(offsets_[i], filters_);
    // A filter with one input channel or a 1x1 kernel reads the same in both orders.
    std::erase_if(filters_, [](const FilterSpec& f) { return f.c == 1 || f.rs == 1; });
  }
  first_compute_ = layers_.size();
  nchw_in_.resize(layers_.size());
  nchw_d_in_.resize(layers_.size());
  nchw_views_.resize(layers_.size());
  nchw_d_views_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Dims& in = i == 0 ? input_dims_ : dims_[i - 1];
    const Dims& d = dims_[i];
    if (!layers_[i]->any_layout()) {
      if (nhwc && has_channel_layout(in)) {
        nchw_in_[i] = DeviceArray<std::byte>(backend_, act_bytes(in));
        nchw_d_in_[i] = DeviceArray<std::byte>(backend_, act_bytes(in));
        nchw_views_[i] = Tensor{nchw_in_[i].data(), 0, in};
        nchw_d_views_[i] = Tensor{nchw_d_in_[i].data(), 0, in};
      }
      HT_REQUIRE(!channels_last || !has_channel_layout(d),
                 "layer " + layers_[i]->name() + ": channels-last backends need layers of any " +
                     "layout to produce activations with channels");
      nhwc = false;
    }
    if (layers_[i]->is_view()) {
      HT_REQUIRE(dims_elems(in) == dims_elems(d), "a view layer must keep the element count");
      acts_.emplace_back();
      d_acts_.emplace_back();
      out_views_.push_back(Tensor{nullptr, 0, d});
      void* grad = nchw_d_in_[i].size() > 0 ? nchw_d_in_[i].data()
                   : i == 0                 ? nullptr
                                            : d_views_[i - 1].data;
      d_views_.push_back(Tensor{grad, 0, d});
      continue;
    }
    first_compute_ = std::min(first_compute_, i);
    allocating(
        "the activations of layer " + layers_[i]->name() + " (2 x " + byte_text(act_bytes(d)) + ")",
        [&] {
          acts_.emplace_back(backend_, act_bytes(d));
          d_acts_.emplace_back(backend_, act_bytes(d));
        });
    out_views_.push_back(Tensor{acts_.back().data(), 0, d});
    d_views_.push_back(Tensor{d_acts_.back().data(), 0, d});
  }
  HT_REQUIRE(first_compute_ < layers_.size(), "a model needs a layer that computes something");
  input_.dims = input_dims_;
  // 4. One scratch workspace, shared by all layers (they run one at a time).
  size_t workspace_bytes = 0;
  std::string widest;
  for (const auto& layer : layers_) {
    const size_t bytes = layer->workspace_bytes(backend_, max_batch_);
    if (bytes > workspace_bytes) widest = layer->name();
    workspace_bytes = std::max(workspace_bytes, bytes);
  }
  if (workspace_bytes > 0) {
    allocating("the workspace of layer " + widest + " (" + byte_text(workspace_bytes) + ")",
               [&] { workspace_ = DeviceArray<std::byte>(backend_, workspace_bytes); });
  }
  for (auto& layer : layers_) layer->set_workspace(workspace_.data());
}

std::string Model::batchnorm_with_one_value(int64_t batch) const {
  const auto one_value = [batch](const Layer* l) {
    const auto* bn = dynamic_cast<const BatchNorm*>(l);
    return bn != nullptr && bn->one_value_per_channel(batch);
  };
  for (const auto& layer : layers_) {
    if (one_value(layer.get())) return layer->name();
    for (const Layer* part : layer->sublayers()) {
      if (one_value(part)) return part->name();
    }
  }
  return "";
}

void Model::init_params(uint64_t seed) {
  std::vector<float> host(param_count_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    // Each layer draws from its own stream, so adding a layer does not change
    // the initial values of the others.
    Rng rng(mix_seed(seed, 0x5eed, i));
    layers_[i]->init_params(rng, host.data() + offsets_[i]);
  }
  set_params(host.data());
  std::vector<float> state(state_count_);
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->init_state(state.data() + state_offsets_[i]);
  set_state(state.data());
}

void Model::get_params(float* host) const {
  backend_.copy_to_host(host, params_.data(), param_count_ * sizeof(float));
}

void Model::set_params(const float* host) {
  backend_.copy_to_device(params_.data(), host, param_count_ * sizeof(float));
  weights_stale_ = true;
}

void Model::get_state(float* host) const {
  backend_.copy_to_host(host, state_.data(), state_count_ * sizeof(float));
}

void Model::set_state(const float* host) {
  backend_.copy_to_device(state_.data(), host, state_count_ * sizeof(float));
}

const Tensor& Model::forward(const void* input, int64_t batch, bool training, uint64_t seed) {
  HT_REQUIRE(batch >= 1 && batch <= max_batch_, "batch size outside the model's buffers");
  if (weights_stale_ && weights_.size() > 0) {  // once per step
    backend_.convert(params_.data(), weights_.data(), param_count_);
    const size_t act_size = dtype_size(backend_.act_type());
    for (const FilterSpec& f : filters_) {
      backend_.convert_filter(params_.data() + f.offset, weights_.data() + f.offset * act_size, f.k,
                              f.c, f.rs);
    }
  }
  weights_stale_ = false;
  input_.data = const_cast<void*>(input);  // layers never write their input
  input_.batch = batch;
  if (input_nhwc_.size() > 0) {
    const auto [c, hw] = channels_and_plane(input_dims_);
    backend_.transpose(input, input_nhwc_.data(), static_cast<int>(batch), c, hw);
    input_.data = input_nhwc_.data();
  }
  const Tensor* x = &input_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (nchw_in_[i].size() > 0) {  // NHWC [hw][c] -> NCHW [c][hw]
      const auto [c, hw] = channels_and_plane(x->dims);
      nchw_views_[i].batch = batch;
      backend_.transpose(x->data, nchw_views_[i].data, static_cast<int>(batch), hw, c);
      x = &nchw_views_[i];
    }
    out_views_[i].batch = batch;
    if (layers_[i]->is_view()) out_views_[i].data = x->data;
    if (training) layers_[i]->set_rng_seed(mix_seed(seed, 0xd7, i));
    if (clock_ != nullptr) clock_->start(i, false);
    layers_[i]->forward(backend_, *x, out_views_[i], training);
    if (clock_ != nullptr) clock_->stop(i, false);
    x = &out_views_[i];
  }
  return out_views_.back();
}

void Model::backward(GradientListener* listener) {
  const int64_t batch = input_.batch;
  for (size_t i = layers_.size(); i-- > 0;) {
    const bool nchw = nchw_in_[i].size() > 0;
    const Tensor& x = nchw ? nchw_views_[i] : i == 0 ? input_ : out_views_[i - 1];
    Tensor* dx = nullptr;
    // Layers before the first computing one are views of the model input: no dx needed.
    if (i > first_compute_) {
      d_views_[i - 1].batch = batch;
      dx = &d_views_[i - 1];
      if (nchw) {
        nchw_d_views_[i].batch = batch;
        dx = &nchw_d_views_[i];
      }
    }
    d_views_[i].batch = batch;
    if (clock_ != nullptr) clock_->start(i, true);
    layers_[i]->backward(backend_, x, out_views_[i], d_views_[i], dx);
    if (nchw && dx != nullptr) {  // NCHW [c][hw] -> NHWC [hw][c]
      const auto [c, hw] = channels_and_plane(x.dims);
      backend_.transpose(dx->data, d_views_[i - 1].data, static_cast<int>(batch), c, hw);
    }
    if (clock_ != nullptr) clock_->stop(i, true);
    if (listener != nullptr && layers_[i]->param_count() > 0) {
      listener->grads_final_from(offsets_[i]);
    }
  }
}

std::string Model::architecture() const {
  std::string out = "input " + dims_text(input_dims_) + "\n";
  for (size_t i = 0; i < layers_.size(); ++i) {
    out += "layer " + layers_[i]->name() + " " + layers_[i]->type() +
           " params=" + std::to_string(layers_[i]->param_count());
    if (layers_[i]->state_count() > 0) out += " state=" + std::to_string(layers_[i]->state_count());
    out += " out=" + dims_text(dims_[i]);
    const std::string attributes = layers_[i]->attributes();
    if (!attributes.empty()) out += " " + attributes;
    out += "\n";
  }
  return out;
}

void Model::visit_params(const std::function<void(const float*, size_t)>& visit) const {
  if (backend_.host_accessible()) {
    visit(params_.data(), param_count_);
    return;
  }
  constexpr size_t kPiece = size_t{1} << 20;
  std::vector<float> piece(std::min(param_count_, kPiece));
  for (size_t offset = 0; offset < param_count_; offset += piece.size()) {
    const size_t n = std::min(piece.size(), param_count_ - offset);
    backend_.copy_to_host(piece.data(), params_.data() + offset, n * sizeof(float));
    visit(piece.data(), n);
  }
}

std::string Model::params_sha256() const {
  Sha256 sha;  // of little-endian float32, in layer order
  visit_params([&](const float* p, size_t n) { sha.update(p, n * sizeof(float)); });
  return sha.finish_hex();
}

}  // namespace hpctrain
