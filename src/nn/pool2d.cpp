// Pool2d forward/backward as backend pooling calls on the whole batch.
#include "nn/pool2d.hpp"

#include "nn/layer_registry.hpp"

namespace hpctrain {

void Pool2d::forward(Backend& backend, const Tensor& x, Tensor& y, bool /*training*/) {
  Pool2dShape s = shape_;
  s.n = static_cast<int>(x.batch);
  if (kind_ == Kind::kMax) {
    backend.maxpool2d_forward(s, x.data, y.data);
  } else {
    backend.avgpool2d_forward(s, x.data, y.data);
  }
}

void Pool2d::backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                      Tensor* dx) {
  if (dx == nullptr) return;
  Pool2dShape s = shape_;
  s.n = static_cast<int>(x.batch);
  if (kind_ == Kind::kMax) {
    backend.maxpool2d_backward(s, x.data, y.data, dy.data, dx->data);
  } else {
    backend.avgpool2d_backward(s, dy.data, dx->data);
  }
}

namespace {

// A pooling window holds input cells wherever it sits: padding <= kernel / 2.
std::vector<LayerKeyDecl> pool_keys() {
  return {{"kernel", integer(1, kMaxWindow), std::nullopt, "the window's height and width"},
          {"stride", integer(1, kMaxWindow).default_of([](const LayerSpec& s) {
             return s.integer("kernel");
           }),
           std::nullopt, "the step between windows (default: the kernel)"},
          {"padding", integer(0).max_of([](const LayerSpec& s) { return s.integer("kernel") / 2; }),
           int64_t{0}, "cells added on each side (at most kernel / 2)"}};
}

template <Pool2d::Kind kind>
std::unique_ptr<Layer> build_pool(const LayerSpec& s) {
  return std::make_unique<Pool2d>(s.name, kind, static_cast<int>(s.integer("kernel")),
                                  static_cast<int>(s.integer("stride")),
                                  static_cast<int>(s.integer("padding")));
}

}  // namespace

extern const LayerType kMaxPoolLayer = {
    {"maxpool", "the maximum of each window of each channel (padded cells never win)", pool_keys()},
    build_pool<Pool2d::Kind::kMax>};

extern const LayerType kAvgPoolLayer = {
    {"avgpool",
     "the mean of each window of each channel (padded cells count as zeros, PyTorch's "
     "count_include_pad)",
     pool_keys()},
    build_pool<Pool2d::Kind::kAvg>};

}  // namespace hpctrain
