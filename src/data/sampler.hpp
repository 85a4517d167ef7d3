// Which samples a rank sees, and in what order: pure functions of (data size,
// world size, rank, seed, epoch), so a checkpoint needs only the cursor.
#pragma once

#include <cstdint>
#include <vector>

namespace hpctrain {

// A contiguous range of rows [begin, begin + count) of a data file.
struct Shard {
  int64_t begin = 0;
  int64_t count = 0;
};

// Divides n by the weights (>= 0, not all 0): floor(n * w / sum) each, then one more to the
// parts with the largest remainders (ties: the earlier part), so the counts add up to n.
std::vector<int64_t> apportion(int64_t n, const std::vector<int64_t>& weights);

// Balanced contiguous split of n rows over `size` ranks (sizes differ by <= 1).
Shard shard_for_rank(int64_t n, int rank, int size);

// Training steps per epoch that every rank can take with full batches: all ranks
// must agree, so it follows from the smallest shard, floor(n / size).
int64_t steps_per_epoch(int64_t n, int size, int64_t batch);

class Sampler {
 public:
  // shard_count: rows in this rank's shard; batches_per_epoch: how many batches
  // an epoch has (full batches only when drop_last).
  Sampler(int64_t shard_count, int64_t batch, int64_t batches_per_epoch, bool shuffle,
          uint64_t seed, int rank);

  int64_t batch() const { return batch_; }
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Local row indices (0-based within the shard) in the order of `epoch`: a
  // permutation seeded by (seed, epoch, rank), or the identity without shuffle.
  void epoch_order(int64_t epoch, std::vector<int64_t>& order) const;
  // Rows in batch `b` of an epoch.
  int64_t batch_size(int64_t b) const;

 private:
  int64_t shard_count_, batch_, batches_per_epoch_;
  bool shuffle_;
  uint64_t seed_;
  int rank_;
};

}  // namespace hpctrain
