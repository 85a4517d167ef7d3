// BasicBlock: sub-layer wiring over the block's buffers.
#include "nn/basic_block.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {
namespace {

Conv2d::Options conv(int filters, int kernel, int stride, int padding) {
  return Conv2d::Options{filters, kernel, stride, padding, /*bias=*/false};
}

// The parts' indices in parts_ (and sublayers()), for the part clock.
enum Part : size_t { kConv1, kBn1, kConv2, kBn2, kShortcutConv, kShortcutBn };

}  // namespace

BasicBlock::BasicBlock(std::string name, int filters, int stride)
    : Layer(std::move(name)),
      filters_(filters),
      stride_(stride),
      conv1_(this->name() + ".conv1", conv(std::max(filters, 1), 3, std::max(stride, 1), 1)),
      conv2_(this->name() + ".conv2", conv(std::max(filters, 1), 3, 1, 1)),
      bn1_(this->name() + ".bn1"),
      bn2_(this->name() + ".bn2") {
  if (filters < 1 || stride < 1) {
    throw UsageError("layer " + this->name() + ": basic_block needs filters >= 1 and stride >= 1");
  }
}

BasicBlock::~BasicBlock() = default;

Dims BasicBlock::output_dims(const Dims& input) {
  if (input.size() != 3) {
    throw UsageError("layer " + name() +
                     ": basic_block expects [channels, height, width] inputs, got " +
                     std::to_string(input.size()) + "-D ones");
  }
  in_dims_ = input;
  out_dims_ = bn1_.output_dims(conv1_.output_dims(input));
  bn2_.output_dims(conv2_.output_dims(out_dims_));
  down_conv_.reset();
  down_bn_.reset();
  if (stride_ != 1 || input[0] != filters_) {
    down_conv_ = std::make_unique<Conv2d>(name() + ".shortcut_conv", conv(filters_, 1, stride_, 0));
    down_bn_ = std::make_unique<BatchNorm>(name() + ".shortcut_bn");
    const Dims d = down_bn_->output_dims(down_conv_->output_dims(input));
    HT_REQUIRE(d == out_dims_, "basic_block: shortcut and main path shapes differ");
  }
  parts_ = {&conv1_, &bn1_, &conv2_, &bn2_};  // in Part order
  if (down_conv_) parts_.insert(parts_.end(), {down_conv_.get(), down_bn_.get()});
  out_elems_ = dims_elems(out_dims_);
  return out_dims_;
}

size_t BasicBlock::param_count() const {
  size_t n = 0;
  for (const Layer* l : parts_) n += l->param_count();
  return n;
}

size_t BasicBlock::state_count() const {
  size_t n = 0;
  for (const Layer* l : parts_) n += l->state_count();
  return n;
}

int64_t BasicBlock::forward_macs() const {
  int64_t n = out_elems_;  // the residual addition
  for (const Layer* l : parts_) n += l->forward_macs();
  return n;
}

std::string BasicBlock::attributes() const {
  return "filters=" + std::to_string(filters_) + " s=" + std::to_string(stride_) +
         (down_conv_ ? " projection" : " identity");
}

size_t BasicBlock::buffer_bytes(int64_t max_batch, size_t act_size) const {
  // 256 bytes (cudaMalloc's alignment): each buffer, and the children's workspace after
  // them, start as aligned as a buffer of their own, for vector accesses and cuDNN.
  constexpr size_t kAlign = 256;
  const size_t bytes = static_cast<size_t>(max_batch * out_elems_) * act_size;
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

size_t BasicBlock::scratch_bytes(int64_t max_batch, size_t act_size) const {
  return 3 * buffer_bytes(max_batch, act_size);
}

size_t BasicBlock::workspace_bytes(Backend& backend, int64_t max_batch) const {
  size_t children = 0;
  for (const Layer* l : parts_)
    children = std::max(children, l->workspace_bytes(backend, max_batch));
  return scratch_bytes(max_batch, dtype_size(backend.act_type())) + children;
}

void BasicBlock::set_workspace(void* workspace) {
  Layer::set_workspace(workspace);
  if (workspace == nullptr) return;
  const size_t per_buffer = buffer_bytes(max_batch_, act_size_);
  auto* base = static_cast<std::byte*>(workspace);
  ga_ = {base, 0, out_dims_};
  gb_ = {base + per_buffer, 0, out_dims_};
  gc_ = {base + 2 * per_buffer, 0, out_dims_};
  std::byte* children = base + scratch_bytes(max_batch_, act_size_);
  for (Layer* l : parts_) l->set_workspace(children);
}

void BasicBlock::allocate(Backend& backend, int64_t max_batch) {
  max_batch_ = max_batch;
  act_size_ = dtype_size(backend.act_type());
  const size_t n = static_cast<size_t>(max_batch * out_elems_) * dtype_size(backend.act_type());
  t1_ = DeviceArray<std::byte>(backend, n);
  t2_ = DeviceArray<std::byte>(backend, n);
  t4_ = DeviceArray<std::byte>(backend, n);
  t1v_ = {t1_.data(), 0, out_dims_};
  t2v_ = {t2_.data(), 0, out_dims_};
  t4v_ = {t4_.data(), 0, out_dims_};
  if (down_conv_) {
    s1_ = DeviceArray<std::byte>(backend, n);
    s2_ = DeviceArray<std::byte>(backend, n);
    s1v_ = {s1_.data(), 0, out_dims_};
    s2v_ = {s2_.data(), 0, out_dims_};
  }
  for (Layer* l : parts_) l->allocate(backend, max_batch);
}

void BasicBlock::set_batch(int64_t batch) {
  for (Tensor* t : {&t1v_, &t2v_, &t4v_, &s1v_, &s2v_, &ga_, &gb_, &gc_}) t->batch = batch;
}

void BasicBlock::filters(size_t offset, std::vector<FilterSpec>& out) const {
  for (const Layer* l : parts_) {
    l->filters(offset, out);
    offset += l->param_count();
  }
}

void BasicBlock::bind(const ParamSlice& p) {
  size_t offset = 0;
  for (Layer* l : parts_) {
    l->bind(p.from(offset));
    offset += l->param_count();
  }
}

void BasicBlock::init_params(Rng& rng, float* host_params) {
  for (Layer* l : parts_) {
    l->init_params(rng, host_params);
    host_params += l->param_count();
  }
}

void BasicBlock::bind_state(float* state) {
  for (Layer* l : parts_) {
    l->bind_state(state);
    state += l->state_count();
  }
}

void BasicBlock::init_state(float* host_state) {
  for (Layer* l : parts_) {
    l->init_state(host_state);
    host_state += l->state_count();
  }
}

template <typename F>
void BasicBlock::timed(size_t part, bool backward, F&& f) {
  if (part_clock_ != nullptr) part_clock_->start(part, backward);
  f();
  if (part_clock_ != nullptr) part_clock_->stop(part, backward);
}

void BasicBlock::forward(Backend& backend, const Tensor& x, Tensor& y, bool training) {
  set_batch(x.batch);
  timed(kConv1, false, [&] { conv1_.forward(backend, x, t1v_, training); });
  timed(kBn1, false, [&] { bn1_.forward_add_relu(backend, t1v_, nullptr, t2v_, training); });
  timed(kConv2, false, [&] { conv2_.forward(backend, t2v_, t4v_, training); });
  const void* shortcut = x.data;
  if (down_conv_) {
    timed(kShortcutConv, false, [&] { down_conv_->forward(backend, x, s1v_, training); });
    timed(kShortcutBn, false, [&] { down_bn_->forward(backend, s1v_, s2v_, training); });
    shortcut = s2v_.data;
  }
  timed(kBn2, false, [&] { bn2_.forward_add_relu(backend, t4v_, shortcut, y, training); });
}

void BasicBlock::backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                          Tensor* dx) {
  set_batch(x.batch);
  // The gradient at the sum goes to both branches. An identity shortcut passes it on
  // unchanged: it is written straight into dx, and the main branch's gradient added to it.
  const bool identity_into_dx = !down_conv_ && dx != nullptr;
  Tensor& ga = identity_into_dx ? *dx : ga_;
  timed(kBn2, true, [&] { bn2_.backward_add_relu(backend, t4v_, y, dy, ga.data, &gb_); });
  timed(kConv2, true, [&] { conv2_.backward(backend, t2v_, t4v_, gb_, &gc_); });
  timed(kBn1, true, [&] { bn1_.backward_add_relu(backend, t1v_, t2v_, gc_, gc_.data, &gb_); });
  timed(kConv1, true,
        [&] { conv1_.backward(backend, x, gb_, dx, /*accumulate_dx=*/identity_into_dx); });
  if (down_conv_) {
    timed(kShortcutBn, true, [&] { down_bn_->backward(backend, s1v_, s2v_, ga_, &gc_); });
    timed(kShortcutConv, true,
          [&] { down_conv_->backward(backend, x, gc_, dx, /*accumulate_dx=*/true); });
  }
}

extern const LayerType kBasicBlockLayer = {
    {"basic_block",
     "a ResNet basic block: two 3x3 convolutions with BatchNorm and ReLU, and a projection "
     "shortcut where the shape changes",
     {{"filters", integer(1, kMaxChannels), std::nullopt, "output channels"},
      {"stride", integer(1, kMaxWindow), int64_t{1}, "the first convolution's stride"}}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> {
      return std::make_unique<BasicBlock>(s.name, static_cast<int>(s.integer("filters")),
                                          static_cast<int>(s.integer("stride")));
    }};

}  // namespace hpctrain
