// Wall-clock timing for phases and step parts.
#pragma once

#include <chrono>

namespace hpctrain {

inline double now_seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Accumulates time between start() and stop(); cheap enough for the step loop.
class Stopwatch {
 public:
  void start() { t0_ = now_seconds(); }
  void stop() { total_ += now_seconds() - t0_; }
  double total() const { return total_; }
  void reset() { total_ = 0.0; }

 private:
  double t0_ = 0.0;
  double total_ = 0.0;
};

}  // namespace hpctrain
