#include "core/deadline.hpp"

#include <unistd.h>

#include <chrono>

#include "core/error.hpp"
#include "core/log.hpp"

namespace hpctrain {

Deadline::Deadline(double seconds, std::string message, int exit_code, bool warning) {
  if (seconds <= 0 || seconds >= kNoBoundSeconds) return;
  thread_ = std::thread([this, seconds, message = std::move(message), exit_code, warning] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
      return;
    }
    if (warning) {
      log_warn(message);
    } else {
      log_error(message);
    }
    _exit(ending_code(exit_code));
  });
}

Deadline::~Deadline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hpctrain
