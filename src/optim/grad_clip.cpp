#include "optim/grad_clip.hpp"

namespace hpctrain {

void GradClipper::clip(float* grads, const std::vector<ParamRange>& trainable) {
  backend_.fill_zero(sum_.data(), 1);
  for (const ParamRange& r : trainable)
    backend_.sum_squares(grads + r.offset, r.count, sum_.data());
  for (const ParamRange& r : trainable) {
    backend_.clip_by_norm(grads + r.offset, r.count, sum_.data(), max_norm_);
  }
}

}  // namespace hpctrain
