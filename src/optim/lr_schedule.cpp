// Linear warm-up followed by constant, step or cosine decay (Goyal et al. 2017 for
// the warm-up; epochs are fractional so decay is smooth within an epoch).
#include "optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace hpctrain {

LrSchedule::LrSchedule(const OptimizerConfig& config, int64_t steps_per_epoch, int epochs,
                       double scale)
    : schedule_(config.schedule),
      base_lr_(config.lr),
      steps_per_epoch_(static_cast<double>(std::max<int64_t>(steps_per_epoch, 1))),
      total_epochs_(epochs),
      scale_(scale) {}

double LrSchedule::at(int64_t step) const { return scale_ * unscaled(step); }

double LrSchedule::unscaled(int64_t step) const {
  // Position at the end of this step, in epochs: step 0 of a warm-up is not 0.
  const double t = static_cast<double>(step + 1) / steps_per_epoch_;
  const double warmup = schedule_.warmup_epochs;
  if (warmup > 0.0 && t < warmup) return base_lr_ * t / warmup;
  switch (schedule_.type) {
    case ScheduleType::kConstant:
      return base_lr_;
    case ScheduleType::kStep: {
      const double decays = std::floor(static_cast<double>(step) / steps_per_epoch_ /
                                       static_cast<double>(schedule_.step_epochs));
      return base_lr_ * std::pow(schedule_.gamma, decays);
    }
    case ScheduleType::kCosine: {
      const double span = std::max(total_epochs_ - warmup, 1e-12);
      const double progress = std::clamp((t - warmup) / span, 0.0, 1.0);
      return schedule_.min_lr +
             (base_lr_ - schedule_.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
  }
  return base_lr_;
}

}  // namespace hpctrain
