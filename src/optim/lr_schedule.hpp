// Learning-rate schedules as a pure function of the global step, so a resumed run
// gets the same rate as an uninterrupted one from the step count alone.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace hpctrain {

class LrSchedule {
 public:
  // `scale` multiplies every rate (optimizer.lr_scaling).
  LrSchedule(const OptimizerConfig& config, int64_t steps_per_epoch, int epochs,
             double scale = 1.0);
  // Rate for the update at 0-based global step `step`.
  double at(int64_t step) const;

 private:
  double unscaled(int64_t step) const;

  ScheduleConfig schedule_;
  double base_lr_;
  double steps_per_epoch_;
  double total_epochs_;
  double scale_;
};

}  // namespace hpctrain
