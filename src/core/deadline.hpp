// A bound on work that cannot be interrupted from inside, such as an HDF5 call looping on
// a damaged file: while a Deadline lives, a thread of its own waits; if the time runs out
// first it prints one error line and ends the process with _exit (the stuck thread holds
// the library, so nothing may run atexit). For the programs without MPI (inspect); a
// training run has the watchdog (train/watchdog.hpp).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace hpctrain {

// Bounds of this many seconds (about 31 years) or more are none: std::chrono's clocks
// overflow past about 9.2e9 s, where a wait would end at once.
constexpr double kNoBoundSeconds = 1e9;

class Deadline {
 public:
  // seconds <= 0 or >= kNoBoundSeconds: no bound (no thread). `warning`: the message is a
  // warning, not an error (the work is done, and the exit code says how it went).
  Deadline(double seconds, std::string message, int exit_code, bool warning = false);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;  // GUARDED_BY mutex_
  std::thread thread_;
};

}  // namespace hpctrain
