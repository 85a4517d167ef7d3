// A watchdog for collectives: the training thread arms it before a collective
// and disarms it after; a monitor thread aborts the whole job (MPI_Abort) with a
// message naming the collective and the step if one stays armed longer than the
// timeout, so a hung or lost peer never leaves the job waiting forever.
// arm()/disarm() are lock-free and cheap enough for every step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace hpctrain {

class Watchdog {
 public:
  // timeout_seconds <= 0 disables it (no thread is started).
  explicit Watchdog(double timeout_seconds);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // `what` must be a string literal (it is read from the monitor thread). A wait that spans
  // `periods` steps of a peer (a server between a worker's messages) gets that many timeouts.
  void arm(const char* what, int64_t step, double periods = 1.0) noexcept;
  void disarm() noexcept;

  // What is armed, to be put back when a nested wait ends (WatchdogScope).
  struct Armed {
    const char* what;
    int64_t step;
    double limit, deadline;  // deadline 0: disarmed
  };
  Armed armed() const noexcept;
  void restore(const Armed& a) noexcept;

 private:
  void monitor();
  // A stop signal seen at `signal_seen` (now_seconds()) kStopNoteSeconds ago, while the
  // wait armed with `deadline` has lasted as long: one warning naming the wait (a rank stuck
  // in a collective cannot checkpoint, and a scheduler's kill may come first). Returns
  // whether it warned.
  bool note_slow_stop(double signal_seen, double deadline) const;
  static constexpr double kStopNoteSeconds = 5.0;

  double timeout_;
  // When the armed wait times out (now_seconds()); 0 = disarmed. One value, so that the
  // monitor never pairs one wait's start with another's limit.
  std::atomic<double> deadline_{0.0};
  // For the message only.
  std::atomic<const char*> what_{""};
  std::atomic<int64_t> step_{0};
  std::atomic<double> limit_{0.0};  // timeout_ x periods of the armed wait
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;  // GUARDED_BY mutex_
  std::thread thread_;
};

// Arms a watchdog for the lifetime of a scope; then puts back what was armed before (a
// collective inside a watched training step: the step's own deadline goes on).
class WatchdogScope {
 public:
  WatchdogScope(Watchdog& w, const char* what, int64_t step, double periods = 1.0)
      : w_(w), outer_(w.armed()) {
    w_.arm(what, step, periods);
  }
  ~WatchdogScope() { w_.restore(outer_); }
  WatchdogScope(const WatchdogScope&) = delete;
  WatchdogScope& operator=(const WatchdogScope&) = delete;

 private:
  Watchdog& w_;
  Watchdog::Armed outer_;
};

}  // namespace hpctrain
