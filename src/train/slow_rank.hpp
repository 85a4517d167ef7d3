// debug.slow_rank: one rank's forward and backward take `factor` times their time, the
// rank sleeping the difference after backward, so that tests and benchmarks get an uneven
// rank without a second kind of machine (and without it stealing the others' cores).
#pragma once

#include "config/config.hpp"

namespace hpctrain {

class SlowRank {
 public:
  SlowRank(const SlowRankConfig& config, int rank)
      : active_(config.rank == rank && config.factor > 1.0), factor_(config.factor) {}

  // Whether this rank is the slowed one (its steps' compute time must then be measured).
  bool active() const { return active_; }
  // On the slowed rank, sleeps (factor - 1) x `compute_seconds` and returns the seconds
  // slept; 0 elsewhere.
  double stretch(double compute_seconds) const;

 private:
  bool active_;
  double factor_;
};

}  // namespace hpctrain
