// Dynamic loss scaling for float16 activations, as PyTorch's GradScaler: the loss gradient
// is multiplied by a scale S so that small gradients survive float16's range; after the
// all-reduce the gradients are divided by S and checked. A step whose gradients overflowed
// is skipped and S halved; after `interval` steps in a row without overflow S doubles.
// The state lives in the backend's memory and every decision is taken there (the backend's
// unscale_grads / update_loss_scale, and the optimizer's skip flag), so the step loop never
// waits for the device. Ranks agree without communication: they unscale the same summed
// gradients. Used from the training thread only.
// With `fixed` the scale stays 1 and only the check and the skip remain: a step whose summed
// gradients are not finite makes no update (train.on_nonfinite: skip_step, any precision).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.hpp"

namespace hpctrain {

class LossScaler {
 public:
  struct Options {
    float initial_scale = 65536.0f;  // 2^16, PyTorch's default
    float growth = 2.0f;
    float backoff = 0.5f;
    int interval = 2000;
    bool fixed = false;  // scale 1, never changed: the check and the skip only
  };
  // What a checkpoint keeps.
  struct Saved {
    float scale = 0.0f;
    float good_steps = 0.0f;
  };

  LossScaler(Backend& backend, const Options& options);

  // Device pointers for the step: the factor softmax_xent multiplies the loss gradient by
  // (null when fixed: 1), and the flag the optimizer step skips on.
  const float* scale() const {
    return options_.fixed ? nullptr : state_.data() + LossScaleState::kScale;
  }
  const float* skip() const { return state_.data() + LossScaleState::kFoundInf; }
  // Unscales and checks n summed gradients (once per trainable range per step).
  void unscale(float* grads, size_t n) { backend_.unscale_grads(grads, n, state_.data()); }
  // After the optimizer step: backoff or growth, and the flag cleared.
  void update();

  // Host reads (they wait for the device): for checkpoints, and once per epoch.
  Saved save() const;
  void restore(const Saved& saved);
  // Steps skipped since the last call.
  int64_t take_skipped();
  // After an epoch of `steps` steps: take_skipped(), logged with the scale (and, if
  // `warn`, a warning when no step trained; when fixed, a warning when any was skipped).
  int64_t end_epoch(int64_t steps, bool warn);
  float current_scale() const { return save().scale; }
  bool fixed() const { return options_.fixed; }

 private:
  Backend& backend_;
  Options options_;
  DeviceArray<float> state_;
};

}  // namespace hpctrain
