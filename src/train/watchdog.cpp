// Watchdog monitor: wakes a few times per timeout period and compares the armed
// time against the clock.
#include "train/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "comm/mpi_env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"

namespace hpctrain {

Watchdog::Watchdog(double timeout_seconds) : timeout_(timeout_seconds) {
  if (timeout_ > 0.0) thread_ = std::thread([this] { monitor(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::arm(const char* what, int64_t step, double periods) noexcept {
  what_.store(what, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  limit_.store(timeout_ * periods, std::memory_order_relaxed);
  armed_at_.store(now_seconds(), std::memory_order_release);
}

void Watchdog::disarm() noexcept { armed_at_.store(0.0, std::memory_order_release); }

Watchdog::Armed Watchdog::armed() const noexcept {
  return {what_.load(std::memory_order_relaxed), step_.load(std::memory_order_relaxed),
          limit_.load(std::memory_order_relaxed), armed_at_.load(std::memory_order_acquire)};
}

void Watchdog::restore(const Armed& a) noexcept {
  disarm();  // the monitor never pairs the inner wait's start with the outer's limit
  if (a.since == 0.0) return;
  what_.store(a.what, std::memory_order_relaxed);
  step_.store(a.step, std::memory_order_relaxed);
  limit_.store(a.limit, std::memory_order_relaxed);
  armed_at_.store(a.since, std::memory_order_release);
}

void Watchdog::monitor() {
  const auto period = std::chrono::duration<double>(std::clamp(timeout_ / 4.0, 0.05, 1.0));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
    const double armed = armed_at_.load(std::memory_order_acquire);
    const double limit = limit_.load(std::memory_order_relaxed);
    if (armed == 0.0 || now_seconds() - armed < limit) continue;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "%s at step %lld has not finished after %g s (distributed.timeout_seconds): a "
                  "peer rank is hung or lost; aborting the job",
                  what_.load(std::memory_order_relaxed),
                  static_cast<long long>(step_.load(std::memory_order_relaxed)), limit);
    log_error(line);
    MpiEnv::abort(kExitFailure);
  }
}

}  // namespace hpctrain
