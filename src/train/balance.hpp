// distributed.balance: the weights by which the ranks share a step's samples (data/
// batch_plan.hpp), and for `auto` the measurement of each rank's speed and the batches of
// the next epoch. Pure functions but the meter, so every rank computes the same plan from
// the same gathered inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace hpctrain {

// The ranks' weights for balance `equal` and `auto` (all 1: auto's first epoch shares
// equally) or `weights` (cpu_weight or cuda_weight by each rank's device, in proportion).
// `devices`: each rank's backend name. UsageError naming the key when a weight other than 1
// is given for a device no rank computes on.
std::vector<int64_t> balance_weights(const Config& config, const std::vector<std::string>& devices);

// The largest batch a rank gets under balance auto, for `total` samples per micro-batch
// over `ranks`: twice the equal share (rounded up), and at most total - (ranks - 1). The
// model is allocated for it once.
int64_t auto_batch_cap(int64_t total, int ranks);

// The next epoch's batches from the current `batches` and each rank's speed `rates`
// (samples per second, > 0): in proportion to the rates, each at most doubled or halved and
// within [1, cap], adding up to the same total.
std::vector<int64_t> balanced_batches(const std::vector<int64_t>& batches,
                                      const std::vector<double>& rates, int64_t cap);

// One rank's speed: the forward and backward time of the steps measured since reset()
// (Trainer::compute_gradients measures them), and their samples.
class BalanceMeter {
 public:
  void add(double seconds, int64_t samples) {
    seconds_ += seconds;
    samples_ += samples;
  }
  // Samples per second; 0 when nothing was measured.
  double rate() const { return seconds_ > 0 ? static_cast<double>(samples_) / seconds_ : 0.0; }
  void reset() { *this = BalanceMeter(); }

 private:
  double seconds_ = 0;
  int64_t samples_ = 0;
};

}  // namespace hpctrain
