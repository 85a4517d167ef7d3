// Dropout through the backend's counter-based mask.
#include "nn/dropout.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {

Dropout::Dropout(std::string name, float p) : Layer(std::move(name)), p_(p) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw UsageError("layer " + this->name() + ": dropout needs 0 <= p < 1");
  }
}

std::string Dropout::attributes() const {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "p=%g", static_cast<double>(p_));
  return buf;
}

Dims Dropout::output_dims(const Dims& input) {
  sample_elems_ = dims_elems(input);
  return input;
}

void Dropout::allocate(Backend& backend, int64_t max_batch) {
  mask_ = DeviceArray<std::byte>(
      backend, static_cast<size_t>(max_batch * sample_elems_) * dtype_size(backend.act_type()));
}

void Dropout::forward(Backend& backend, const Tensor& x, Tensor& y, bool training) {
  const size_t n = static_cast<size_t>(x.elems());
  masked_ = training && p_ > 0.0f;
  if (masked_) {
    backend.dropout_forward(x.data, y.data, mask_.data(), n, p_, seed_);
  } else {
    backend.copy(x.data, y.data, n * dtype_size(backend.act_type()));
  }
}

void Dropout::backward(Backend& backend, const Tensor& /*x*/, const Tensor& y, const Tensor& dy,
                       Tensor* dx) {
  if (dx == nullptr) return;
  const size_t n = static_cast<size_t>(y.elems());
  if (masked_) {
    backend.multiply(dy.data, mask_.data(), dx->data, n);
  } else {
    backend.copy(dy.data, dx->data, n * dtype_size(backend.act_type()));
  }
}

extern const LayerType kDropoutLayer = {
    {"dropout",
     "zeroes each element with probability rate in training and scales the rest by 1 / (1 - "
     "rate); masks drawn from the seed, the rank and the step",
     {{"rate", number(NumberRange::at_least(0).below(1).as_float32()), 0.5,
       "the probability of zeroing"}}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> {
      return std::make_unique<Dropout>(s.name, static_cast<float>(s.number("rate")));
    }};

}  // namespace hpctrain
