// Rank 0's progress line during long phases: at most one line every few seconds,
// never per-step output. Other ranks stay quiet.
#pragma once

#include <cstdint>

namespace hpctrain {

class Progress {
 public:
  Progress(bool enabled, double interval_seconds);
  // Cheap to call every step: prints only when the interval has passed.
  bool due(double now) const { return enabled_ && now >= next_; }
  // `eta_seconds`: the training steps left in the run at the epoch's rate so far (negative:
  // not known); validation and test come on top.
  void print(int epoch, int epochs, int64_t step, int64_t steps, double loss, double accuracy,
             double samples_per_second, double eta_seconds, double now);
  // An evaluation pass: "  PHASE  batch B/N".
  void print(const char* phase, int64_t batch, int64_t batches, double now);

 private:
  bool enabled_;
  double interval_;
  double next_;
};

}  // namespace hpctrain
