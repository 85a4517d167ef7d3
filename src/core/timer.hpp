// Wall-clock timing for phases and step parts, and the process's CPU time.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <ctime>
#include <string>

namespace hpctrain {

inline double now_seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// The wall-clock time now, UTC, ISO 8601 to the second: 2026-11-26T00:47:00Z, written into
// `out` (its memory reused: no allocation once it has held one).
inline void utc_now(std::string& out) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  out.assign(buf, std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm));
}

inline std::string utc_now() {
  std::string out;
  utc_now(out);
  return out;
}

// CPU seconds (user + system) this process has used, all its threads together.
inline double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
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
