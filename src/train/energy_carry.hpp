// The energy of a run's epochs across its resumes. Each checkpoint carries the energy of
// the run's epochs up to its step (kEnergySoFarArray), so that the process that finishes a
// resumed run reports the whole run's (summary.json "energy_whole_run"), not only its own.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/communicator.hpp"
#include "train/energy.hpp"

namespace hpctrain {

struct EnergySoFar {
  // Every part of the run so far was sampled, and its energy carried to the next: false
  // once a part trained with energy.interval_ms 0, or resumed from a checkpoint without
  // the array (of a release before it).
  bool known = false;
  EnergyCounts counts;  // summed over the parts; a source read only where every part read it
  // A run's start: nothing yet, all of it known.
  static EnergySoFar nothing_yet();
  EnergySoFar& operator+=(const EnergyCounts& part);
};

// The figures of one rank in reduce_energy: per source the joules and whether it was not
// read, and the seconds.
inline constexpr size_t kEnergyFigures = 2 * kEnergySources + 1;
// Collective: the job's counts from each rank's own, `mine` null on a rank without a
// sampler: the joules summed over the samplers in rank order (the same on every rank), a
// source read where every sampler read it, the longest node's seconds. `scratch` holds
// kEnergyFigures x comm.size() values, made before training (a checkpoint's step allocates
// nothing).
EnergyCounts reduce_energy(Communicator& comm, const EnergyCounts* mine,
                           std::vector<double>& scratch);

// The checkpoint array (kEnergySoFarFloats): 1 if known else 0, then per source (in the
// order of kEnergySourceNames) its joules as a pair of floats and 1 if read else 0, then
// the seconds as a pair.
inline constexpr size_t kEnergySoFarFloats = 3 * kEnergySources + 3;
void encode_energy(const EnergySoFar& e, std::vector<float>& out);
// What `saved` carries; not known where it is empty or of another length.
EnergySoFar decode_energy(const std::vector<float>& saved);

// The checkpoint array of the run's energy so far.
inline constexpr const char* kEnergySoFarArray = "train/energy_so_far";

}  // namespace hpctrain
