// debug.slow_rank: one rank's forward and backward take `factor` times their time, the
// rank sleeping the difference after backward, so that tests and benchmarks get an uneven
// rank without a second kind of machine (and without it stealing the others' cores). On
// other ranks, or with factor 1, begin() and end() do nothing. On a device backend end()
// synchronises first, to measure the device's time: a debugging aid, not for real runs.
#pragma once

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace hpctrain {

class SlowRank {
 public:
  SlowRank(const SlowRankConfig& config, int rank, Backend& backend);

  void begin();  // before the step's first forward
  void end();    // after its last backward

 private:
  Backend& backend_;
  bool active_;
  double factor_, t0_ = 0;
};

}  // namespace hpctrain
