// Conv2d: shape checks, initialisation, and forward/backward as backend convolution calls.
#include "nn/conv2d.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {

Conv2d::Conv2d(std::string name, const Options& options)
    : Layer(std::move(name)), options_(options) {
  if (options.filters < 1 || options.kernel < 1 || options.stride < 1 || options.padding < 0) {
    throw UsageError("layer " + this->name() +
                     ": conv2d needs filters >= 1, kernel >= 1, stride >= 1 and padding >= 0");
  }
}

Dims Conv2d::output_dims(const Dims& input) {
  if (input.size() != 3) {
    throw UsageError("layer " + name() + ": conv2d expects [channels, height, width] inputs, got " +
                     std::to_string(input.size()) +
                     "-D ones (a flatten or dense layer before it?)");
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max() / 4;
  for (int64_t d : input) {
    if (d > kMax) throw UsageError("layer " + name() + ": input dimension too large");
  }
  const int k = options_.kernel, s = options_.stride, p = options_.padding;
  shape_ = Conv2dShape{0,
                       static_cast<int>(input[0]),
                       static_cast<int>(input[1]),
                       static_cast<int>(input[2]),
                       options_.filters,
                       k,
                       k,
                       s,
                       s,
                       p,
                       p};
  if (shape_.h + 2 * p < k || shape_.w + 2 * p < k) {
    throw UsageError("layer " + name() + ": input " + std::to_string(shape_.h) + "x" +
                     std::to_string(shape_.w) + " with padding " + std::to_string(p) +
                     " is smaller than the " + std::to_string(k) + "x" + std::to_string(k) +
                     " kernel");
  }
  // The GEMMs (im2col, cuDNN) take int sizes: the filter's elements (the inner dimension)
  // and the output plane (the columns of one sample).
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (shape_.patch() > kIntMax) {
    throw UsageError("layer " + name() + ": a filter over " + std::to_string(shape_.c_in) +
                     " input channels with a " + std::to_string(k) + "x" + std::to_string(k) +
                     " kernel has " + std::to_string(shape_.patch()) + " weights, more than " +
                     std::to_string(kIntMax) + " (use fewer channels or a smaller kernel)");
  }
  if (int64_t{shape_.out_h()} * shape_.out_w() > kIntMax) {
    throw UsageError("layer " + name() + ": an output plane of " + std::to_string(shape_.out_h()) +
                     "x" + std::to_string(shape_.out_w()) + " has more than " +
                     std::to_string(kIntMax) + " positions");
  }
  return {shape_.c_out, shape_.out_h(), shape_.out_w()};
}

size_t Conv2d::param_count() const {
  return weight_count() + (options_.bias ? static_cast<size_t>(shape_.c_out) : 0);
}

int64_t Conv2d::forward_macs() const {
  return static_cast<int64_t>(weight_count()) * shape_.out_h() * shape_.out_w();
}

std::string Conv2d::attributes() const {
  const std::string k = std::to_string(options_.kernel), s = std::to_string(options_.stride),
                    p = std::to_string(options_.padding);
  return "k=" + k + "x" + k + " s=" + s + "x" + s + " p=" + p + "x" + p +
         (options_.bias ? " bias" : " nobias");
}

Conv2dShape Conv2d::shape(int64_t batch) const {
  Conv2dShape s = shape_;
  s.n = static_cast<int>(batch);
  return s;
}

size_t Conv2d::workspace_bytes(Backend& backend, int64_t max_batch) const {
  return backend.conv2d_workspace_bytes(shape(max_batch));
}

void Conv2d::bind(const ParamSlice& p) {
  w_ = p.weights_at(0);
  dw_ = p.grads;
  b_ = options_.bias ? p.params + weight_count() : nullptr;
  db_ = options_.bias ? p.grads + weight_count() : nullptr;
}

void Conv2d::init_params(Rng& rng, float* host_params) {
  // He normal over the fan-in c_in * k * k: keeps activation variance through ReLUs.
  const double std_dev = std::sqrt(2.0 / static_cast<double>(shape_.patch()));
  const size_t n = weight_count();
  for (size_t i = 0; i < n; ++i) host_params[i] = static_cast<float>(rng.normal() * std_dev);
  if (options_.bias) {
    for (int i = 0; i < shape_.c_out; ++i) host_params[n + i] = 0.0f;
  }
}

void Conv2d::forward(Backend& backend, const Tensor& x, Tensor& y, bool /*training*/) {
  const Conv2dShape s = shape(x.batch);
  backend.conv2d_forward(s, x.data, w_, y.data, workspace());
  if (options_.bias) backend.add_channel_bias(y.data, b_, s.n, s.c_out, s.out_h() * s.out_w());
}

void Conv2d::backward(Backend& backend, const Tensor& x, const Tensor& dy, Tensor* dx,
                      bool accumulate_dx) {
  const Conv2dShape s = shape(x.batch);
  backend.conv2d_backward_filter(s, x.data, dy.data, dw_, workspace());
  if (options_.bias) backend.sum_channels(dy.data, db_, s.n, s.c_out, s.out_h() * s.out_w());
  if (dx != nullptr) {
    backend.conv2d_backward_data(s, dy.data, w_, dx->data, workspace(), accumulate_dx);
  }
}

extern const LayerType kConv2dLayer = {
    {"conv2d",
     "2-D convolution over [C, H, W] inputs, square kernel, He-normal initialisation",
     {{"filters", integer(1, kMaxChannels), std::nullopt, "output channels"},
      {"kernel", integer(1, kMaxWindow), std::nullopt, "the kernel's height and width"},
      {"stride", integer(1, kMaxWindow), int64_t{1}, "the step between windows"},
      {"padding", integer(0, kMaxWindow), int64_t{0}, "zeros added on each side"},
      {"bias", flag(), true, "add a learned bias per output channel"}}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> {
      Conv2d::Options o;
      o.filters = static_cast<int>(s.integer("filters"));
      o.kernel = static_cast<int>(s.integer("kernel"));
      o.stride = static_cast<int>(s.integer("stride"));
      o.padding = static_cast<int>(s.integer("padding"));
      o.bias = s.flag("bias");
      return std::make_unique<Conv2d>(s.name, o);
    }};

}  // namespace hpctrain
