// Watchdog monitor: wakes a few times per timeout period and compares the armed
// deadline against the clock.
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
  const double limit = timeout_ * periods;
  what_.store(what, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  limit_.store(limit, std::memory_order_relaxed);
  deadline_.store(now_seconds() + limit, std::memory_order_release);
}

void Watchdog::disarm() noexcept { deadline_.store(0.0, std::memory_order_release); }

Watchdog::Armed Watchdog::armed() const noexcept {
  return {what_.load(std::memory_order_relaxed), step_.load(std::memory_order_relaxed),
          limit_.load(std::memory_order_relaxed), deadline_.load(std::memory_order_acquire)};
}

void Watchdog::restore(const Armed& a) noexcept {
  disarm();
  if (a.deadline == 0.0) return;
  what_.store(a.what, std::memory_order_relaxed);
  step_.store(a.step, std::memory_order_relaxed);
  limit_.store(a.limit, std::memory_order_relaxed);
  deadline_.store(a.deadline, std::memory_order_release);
}

void Watchdog::monitor() {
  const auto period = std::chrono::duration<double>(std::clamp(timeout_ / 4.0, 0.05, 1.0));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
    const double deadline = deadline_.load(std::memory_order_acquire);
    if (deadline == 0.0 || now_seconds() < deadline) continue;
    const char* what = what_.load(std::memory_order_relaxed);
    const long long step = step_.load(std::memory_order_relaxed);
    const double limit = limit_.load(std::memory_order_relaxed);
    // Re-armed meanwhile: the fields may be the next wait's; look again next round.
    if (deadline_.load(std::memory_order_acquire) != deadline) continue;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "%s at step %lld has not finished after %g s (distributed.timeout_seconds): a "
                  "peer rank is hung or lost; aborting the job",
                  what, step, limit);
    log_error(line);
    // MPI is initialised MPI_THREAD_FUNNELED, under which only the main thread should call
    // MPI; but the main thread is the one stuck inside a collective, and MPI_Abort is the
    // one call that ends every rank of the job under any launcher. A deliberate last resort.
    MpiEnv::abort(kExitFailure);
  }
}

}  // namespace hpctrain
