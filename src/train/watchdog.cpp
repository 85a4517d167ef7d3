// Watchdog monitor: wakes a few times per timeout period and compares the armed
// deadline against the clock; says where a rank waits when a stop signal is not acted on
// soon.
#include "train/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>

#include "comm/mpi_env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "train/signals.hpp"

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

bool Watchdog::note_slow_stop(double signal_seen, double deadline) const {
  const double now = now_seconds();
  if (deadline == 0.0 || now - signal_seen < kStopNoteSeconds) return false;
  const double limit = limit_.load(std::memory_order_relaxed);
  // Short waits (evaluation batches before the stop takes effect) are not worth a word.
  if (now - (deadline - limit) < kStopNoteSeconds) return false;
  const char* what = what_.load(std::memory_order_relaxed);
  const long long step = step_.load(std::memory_order_relaxed);
  if (deadline_.load(std::memory_order_acquire) != deadline) return false;  // re-armed
  const int sig = stop_signal();
  char line[320];
  std::snprintf(line, sizeof(line),
                "%s came %.0f s ago, and this rank is still in %s at step %lld (for %.0f s): "
                "the stop waits for it, at most %.0f s more (distributed.timeout_seconds); a "
                "peer rank that is hung or lost makes the watchdog end the job then",
                sig == SIGTERM   ? "SIGTERM"
                : sig == SIGUSR1 ? "SIGUSR1"
                                 : "SIGINT",
                now - signal_seen, what, step, now - (deadline - limit), deadline - now);
  log_warn(line);
  return true;
}

void Watchdog::monitor() {
  const auto period = std::chrono::duration<double>(std::clamp(timeout_ / 4.0, 0.05, 1.0));
  double signal_seen = 0;  // when this thread first saw a stop signal
  bool noted = false;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
    const double deadline = deadline_.load(std::memory_order_acquire);
    if (!noted && stop_signal() != 0) {
      if (signal_seen == 0) signal_seen = now_seconds();
      noted = note_slow_stop(signal_seen, deadline);
    }
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
