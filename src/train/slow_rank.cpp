// The slowed rank's sleep.
#include "train/slow_rank.hpp"

#include <chrono>
#include <thread>

namespace hpctrain {

double SlowRank::stretch(double compute_seconds) const {
  if (!active_) return 0.0;
  const double seconds = (factor_ - 1.0) * compute_seconds;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return seconds;
}

}  // namespace hpctrain
