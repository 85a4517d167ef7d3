// Progress line formatting.
#include "train/progress.hpp"

#include <cstdio>
#include <string>

#include "core/log.hpp"
#include "core/timer.hpp"

namespace hpctrain {

Progress::Progress(bool enabled, double interval_seconds)
    : enabled_(enabled && interval_seconds > 0.0),
      interval_(interval_seconds),
      next_(now_seconds() + interval_seconds) {}

void Progress::print(int epoch, int epochs, int64_t step, int64_t steps, double loss,
                     double accuracy, double samples_per_second, double eta_seconds, double now) {
  char eta[32] = "";
  if (eta_seconds >= 0.0 && eta_seconds < 1e8) {
    const auto s = static_cast<long long>(eta_seconds + 0.5);
    if (s >= 3600) {
      std::snprintf(eta, sizeof(eta), "  eta %lldh%02lldm", s / 3600, s / 60 % 60);
    } else if (s >= 60) {
      std::snprintf(eta, sizeof(eta), "  eta %lldm%02llds", s / 60, s % 60);
    } else {
      std::snprintf(eta, sizeof(eta), "  eta %llds", s);
    }
  }
  char line[240];
  std::snprintf(line, sizeof(line),
                "  epoch %d/%d  step %lld/%lld  loss %.4f  acc %.4f  %.0f samples/s%s", epoch,
                epochs, static_cast<long long>(step), static_cast<long long>(steps), loss, accuracy,
                samples_per_second, eta);
  log_info(line);
  next_ = now + interval_;
}

void Progress::print(const char* phase, int64_t batch, int64_t batches, double now) {
  log_info(std::string("  ") + phase + "  batch " + std::to_string(batch) + "/" +
           std::to_string(batches));
  next_ = now + interval_;
}

}  // namespace hpctrain
