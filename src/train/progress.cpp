// Progress line formatting.
#include "train/progress.hpp"

#include <cstdio>

#include "core/log.hpp"
#include "core/timer.hpp"

namespace hpctrain {

Progress::Progress(bool enabled, double interval_seconds)
    : enabled_(enabled && interval_seconds > 0.0),
      interval_(interval_seconds),
      next_(now_seconds() + interval_seconds) {}

void Progress::print(int epoch, int epochs, int64_t step, int64_t steps, double loss,
                     double accuracy, double samples_per_second, double now) {
  char line[200];
  std::snprintf(line, sizeof(line),
                "  epoch %d/%d  step %lld/%lld  loss %.4f  acc %.4f  %.0f samples/s", epoch, epochs,
                static_cast<long long>(step), static_cast<long long>(steps), loss, accuracy,
                samples_per_second);
  log_info(line);
  next_ = now + interval_;
}

}  // namespace hpctrain
