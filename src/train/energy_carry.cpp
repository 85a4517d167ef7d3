#include "train/energy_carry.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "train/epoch_tally.hpp"

namespace hpctrain {

EnergySoFar EnergySoFar::nothing_yet() {
  EnergySoFar e;
  e.known = true;
  std::fill(std::begin(e.counts.read), std::end(e.counts.read), true);
  return e;
}

EnergySoFar& EnergySoFar::operator+=(const EnergyCounts& part) {
  for (int i = 0; i < kEnergySources; ++i) {
    counts.joules[i] += part.joules[i];
    counts.read[i] = counts.read[i] && part.read[i];
  }
  counts.seconds += part.seconds;
  return *this;
}

EnergyCounts reduce_energy(Communicator& comm, const EnergyCounts* mine,
                           std::vector<double>& scratch) {
  HT_REQUIRE(scratch.size() >= kEnergyFigures * static_cast<size_t>(comm.size()),
             "reduce_energy: scratch smaller than the ranks' figures");
  constexpr int n = kEnergySources;
  double v[kEnergyFigures] = {};  // joules, then unread, per source; seconds
  if (mine) {
    for (int i = 0; i < n; ++i) {
      v[i] = mine->joules[i];
      v[n + i] = mine->read[i] ? 0.0 : 1.0;
    }
    v[2 * n] = mine->seconds;
  }
  comm.allgather(v, static_cast<int>(kEnergyFigures), scratch.data());
  EnergyCounts all;
  double unread[n] = {};
  for (int r = 0; r < comm.size(); ++r) {
    const double* f = scratch.data() + kEnergyFigures * static_cast<size_t>(r);
    for (int i = 0; i < n; ++i) {
      all.joules[i] += f[i];
      unread[i] += f[n + i];
    }
    all.seconds = std::max(all.seconds, f[2 * n]);
  }
  for (int i = 0; i < n; ++i) {
    all.read[i] = unread[i] == 0;
    if (!all.read[i]) all.joules[i] = 0;
  }
  return all;
}

void encode_energy(const EnergySoFar& e, std::vector<float>& out) {
  out.assign(kEnergySoFarFloats, 0.0f);
  out[0] = e.known ? 1.0f : 0.0f;
  for (size_t i = 0; i < kEnergySources; ++i) {
    split_double(e.counts.joules[i], &out[1 + 3 * i]);
    out[3 + 3 * i] = e.counts.read[i] ? 1.0f : 0.0f;
  }
  split_double(e.counts.seconds, &out[1 + 3 * kEnergySources]);
}

EnergySoFar decode_energy(const std::vector<float>& saved) {
  EnergySoFar e;
  if (saved.size() != kEnergySoFarFloats || saved[0] != 1.0f) return e;
  e.known = true;
  for (size_t i = 0; i < kEnergySources; ++i) {
    e.counts.joules[i] = join_floats(&saved[1 + 3 * i]);
    e.counts.read[i] = saved[3 + 3 * i] == 1.0f;
  }
  e.counts.seconds = join_floats(&saved[1 + 3 * kEnergySources]);
  return e;
}

}  // namespace hpctrain
