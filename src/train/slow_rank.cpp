// The slowed rank's sleep.
#include "train/slow_rank.hpp"

#include <chrono>
#include <thread>

#include "core/timer.hpp"

namespace hpctrain {

SlowRank::SlowRank(const SlowRankConfig& config, int rank, Backend& backend)
    : backend_(backend),
      active_(config.rank == rank && config.factor > 1.0),
      factor_(config.factor) {}

void SlowRank::begin() {
  if (active_) t0_ = now_seconds();
}

void SlowRank::end() {
  if (!active_) return;
  if (!backend_.host_accessible()) backend_.synchronize();
  const double compute = now_seconds() - t0_;
  std::this_thread::sleep_for(std::chrono::duration<double>((factor_ - 1.0) * compute));
}

}  // namespace hpctrain
