// An epoch's figures so far, over all ranks: what its metrics.csv row is made of. A
// checkpoint taken in the middle of an epoch carries them (kEpochSoFarArray), so that the
// run resuming there reports the whole epoch in its row, not only the steps it trained.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "train/metrics.hpp"

namespace hpctrain {

struct EpochTally {
  double train_s = 0, wait_s = 0, comm_s = 0;   // seconds, the slowest rank's
  double cpu_s = 0;                             // process CPU seconds, mean over the ranks
  double loss_sum = 0, correct = 0, count = 0;  // predictions, all ranks
  EpochTally& operator+=(const EpochTally& o);
};

// The figures of one rank.
inline constexpr size_t kTallyFigures = 7;
// Collective: the job's figures from each rank's own (cpu_s its own): the seconds' maximum,
// the mean CPU seconds and the sums of the predictions, added in rank order (the same on
// every rank). `scratch` holds kTallyFigures x comm.size() values, made before training so
// that a reduction in a step allocates nothing.
EpochTally reduce_tally(Communicator& comm, const EpochTally& mine, std::vector<double>& scratch);

// A double as a pair of floats (the float nearest, and the float nearest the rest), which
// keep it to about 48 bits in a float32 checkpoint array; and back.
void split_double(double v, float* pair);
double join_floats(const float* pair);

// The checkpoint array: the 1-based epoch, then each figure as a pair of floats.
void encode_tally(int epoch, const EpochTally& t, std::vector<float>& out);
// The figures of `epoch` in `saved`, an array encode_tally made; zeros where it is another
// epoch's, or empty or of another length (a checkpoint of a release before it).
EpochTally decode_tally(const std::vector<float>& saved, int epoch);

// m's training figures from `t`, whose predictions are labels_per_sample to a sample (no
// prediction counted: a loss and an accuracy that are not numbers, null in the files).
void fill_training_metrics(const EpochTally& t, int64_t labels_per_sample, EpochMetrics& m);

// The checkpoint array of the epoch's figures so far.
inline constexpr const char* kEpochSoFarArray = "train/epoch_so_far";

}  // namespace hpctrain
