#include "data-tools/progress_note.hpp"

#include <cstdio>
#include <utility>

#include "core/timer.hpp"

namespace hpctrain {

ProgressNote::ProgressNote(std::string what, int64_t total, double interval_seconds)
    : what_(std::move(what)),
      total_(total),
      interval_(interval_seconds),
      start_(now_seconds()),
      next_(start_ + interval_seconds) {}

void ProgressNote::update(int64_t done) {
  const double now = now_seconds();
  if (now < next_) return;
  next_ = now + interval_;
  if (total_ > 0) {
    std::printf("%s: %lld of %lld rows (%.0f%%), %.0f s\n", what_.c_str(),
                static_cast<long long>(done), static_cast<long long>(total_),
                100.0 * static_cast<double>(done) / static_cast<double>(total_), now - start_);
  } else {
    std::printf("%s: %lld rows, %.0f s\n", what_.c_str(), static_cast<long long>(done),
                now - start_);
  }
  std::fflush(stdout);
}

}  // namespace hpctrain
