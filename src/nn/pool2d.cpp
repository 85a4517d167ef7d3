// Pool2d forward/backward as backend pooling calls on the whole batch.
#include "nn/pool2d.hpp"

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

}  // namespace hpctrain
