// GlobalAvgPool as one average pooling whose window is the whole feature map.
#include "nn/global_avgpool.hpp"

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {

Dims GlobalAvgPool::output_dims(const Dims& input) {
  if (input.size() != 3) {
    throw UsageError("layer " + name() +
                     ": global_avgpool expects [channels, height, width] inputs, got " +
                     std::to_string(input.size()) + "-D ones");
  }
  shape_ = pool_shape(name(), type(), input, 1, 1, 0);  // validates the sizes
  shape_.kh = shape_.h;
  shape_.kw = shape_.w;
  return {input[0]};
}

void GlobalAvgPool::forward(Backend& backend, const Tensor& x, Tensor& y, bool /*training*/) {
  Pool2dShape s = shape_;
  s.n = static_cast<int>(x.batch);
  backend.avgpool2d_forward(s, x.data, y.data);
}

void GlobalAvgPool::backward(Backend& backend, const Tensor& x, const Tensor& /*y*/,
                             const Tensor& dy, Tensor* dx) {
  if (dx == nullptr) return;
  Pool2dShape s = shape_;
  s.n = static_cast<int>(x.batch);
  backend.avgpool2d_backward(s, dy.data, dx->data);
}

extern const LayerType kGlobalAvgPoolLayer = {
    {"global_avgpool", "the mean of each channel: [C, H, W] to [C]", {}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> {
      return std::make_unique<GlobalAvgPool>(s.name);
    }};

}  // namespace hpctrain
