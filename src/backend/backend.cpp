// Backend's defaults for the optional operations (device collectives, channels-last
// layout): a backend without them says so.
#include "backend/backend.hpp"

#include <string>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace hpctrain {
namespace {

[[noreturn]] void no_collectives(const Backend& b) {
  throw Error(std::string("the ") + b.name() + " backend has no device collectives");
}

[[noreturn]] void not_channels_last(const Backend& b) {
  throw Error(std::string("the ") + b.name() + " backend does not store activations channels-last");
}

}  // namespace

void Backend::transpose(const void* /*src*/, void* /*dst*/, int /*n*/, int /*a*/, int /*b*/) {
  not_channels_last(*this);
}
void Backend::convert_filter(const float* /*kcrs*/, void* /*krsc*/, int /*k*/, int /*c*/,
                             int /*rs*/) {
  not_channels_last(*this);
}

std::vector<std::byte> Backend::new_collective_id() { no_collectives(*this); }
void Backend::join_collectives(const std::vector<std::byte>& /*id*/, int /*rank*/, int /*size*/) {
  no_collectives(*this);
}
void Backend::allreduce_sum(float* /*x*/, size_t /*n*/) { no_collectives(*this); }
void Backend::broadcast(float* /*x*/, size_t /*n*/, int /*root*/) { no_collectives(*this); }

void Backend::phase_mark(int i) {
  const double t = now_seconds();
  const int prev = i == 0 ? kPhaseMarks - 1 : i - 1;
  if (i > 0 || phase_started_) phase_sums_[prev] += t - phase_stamp_[prev];
  phase_stamp_[i] = t;
  phase_started_ = true;
}

PhaseSeconds Backend::take_phases() {
  const PhaseSeconds sums = phase_sums_;
  phase_sums_ = {};
  phase_started_ = false;
  return sums;
}

}  // namespace hpctrain
