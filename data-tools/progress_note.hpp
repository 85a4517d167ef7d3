// Progress of a long data-tool command: a line on stdout every few seconds while it works
// through rows ("WHAT: D of T rows (P%), S s"), none for a command that ends within the
// first interval. Cheap enough to call once per block of rows.
#pragma once

#include <cstdint>
#include <string>

namespace hpctrain {

class ProgressNote {
 public:
  static constexpr double kIntervalSeconds = 10.0;

  // `total` rows (0: not known in advance).
  ProgressNote(std::string what, int64_t total, double interval_seconds = kIntervalSeconds);
  // `done` rows so far; prints when the interval has passed since the last line.
  void update(int64_t done);

 private:
  std::string what_;
  int64_t total_;
  double interval_, start_, next_;
};

}  // namespace hpctrain
