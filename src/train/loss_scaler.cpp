#include "train/loss_scaler.hpp"

#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"

namespace hpctrain {

LossScaler::LossScaler(Backend& backend, const Options& options)
    : backend_(backend), options_(options), state_(backend, LossScaleState::kCount) {
  if (options_.fixed) {
    options_.initial_scale = options_.growth = options_.backoff = 1.0f;
  } else {
    HT_REQUIRE(options.initial_scale > 0.0f && options.growth >= 1.0f && options.backoff > 0.0f &&
                   options.backoff < 1.0f && options.interval >= 1,
               "loss scaler: bad options");
  }
  restore({options_.initial_scale, 0.0f});
}

void LossScaler::update() {
  backend_.update_loss_scale(state_.data(), options_.growth, options_.backoff, options_.interval);
}

LossScaler::Saved LossScaler::save() const {
  float s[LossScaleState::kCount];
  backend_.copy_to_host(s, state_.data(), sizeof(s));
  return {s[LossScaleState::kScale], s[LossScaleState::kGood]};
}

void LossScaler::restore(const Saved& saved) {
  HT_REQUIRE(saved.scale > 0.0f && saved.good_steps >= 0.0f, "loss scaler: bad saved state");
  float s[LossScaleState::kCount] = {};
  s[LossScaleState::kScale] = saved.scale;
  s[LossScaleState::kGood] = saved.good_steps;
  backend_.copy_to_device(state_.data(), s, sizeof(s));
}

int64_t LossScaler::take_skipped() {
  float s[LossScaleState::kCount];
  backend_.copy_to_host(s, state_.data(), sizeof(s));
  const auto skipped = static_cast<int64_t>(s[LossScaleState::kSkipped]);
  s[LossScaleState::kSkipped] = 0.0f;
  backend_.copy_to_device(state_.data(), s, sizeof(s));
  return skipped;
}

int64_t LossScaler::end_epoch(int64_t steps, bool warn) {
  const int64_t skipped = take_skipped();
  if (options_.fixed) {
    if (warn && skipped > 0) {
      log_warn(std::to_string(skipped) + " of " + std::to_string(steps) +
               " step(s) of this epoch skipped: their gradients were not finite "
               "(train.on_nonfinite: skip_step)");
    }
    return skipped;
  }
  char line[96];
  std::snprintf(line, sizeof(line), "loss scale %g, %lld step(s) skipped for overflow",
                static_cast<double>(current_scale()), static_cast<long long>(skipped));
  log_info(line);
  if (warn && skipped >= steps) {
    // No step trained: more than the scale overflows, and a lower scale cannot help
    // activations beyond float16's range.
    log_warn(
        "every step of this epoch overflowed in float16 and was skipped; try precision bf16 "
        "(float32's range) or a lower learning rate");
  }
  return skipped;
}

}  // namespace hpctrain
