// Sharding and per-epoch shuffles (Fisher-Yates over the portable Rng).
#include "data/sampler.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/random.hpp"

namespace hpctrain {

Shard shard_for_rank(int64_t n, int rank, int size) {
  const int64_t base = n / size, extra = n % size;
  Shard s;
  s.begin = base * rank + std::min<int64_t>(rank, extra);
  s.count = base + (rank < extra ? 1 : 0);
  return s;
}

int64_t steps_per_epoch(int64_t n, int size, int64_t batch) { return n / size / batch; }

Sampler::Sampler(int64_t shard_count, int64_t batch, int64_t batches_per_epoch, bool shuffle,
                 uint64_t seed, int rank)
    : shard_count_(shard_count),
      batch_(batch),
      batches_per_epoch_(batches_per_epoch),
      shuffle_(shuffle),
      seed_(seed),
      rank_(rank) {
  HT_REQUIRE(batch_ >= 1, "batch must be >= 1");
  HT_REQUIRE(batches_per_epoch_ * batch_ - batch_ < shard_count_ || batches_per_epoch_ == 0,
             "more batches per epoch than the shard holds");
}

void Sampler::epoch_order(int64_t epoch, std::vector<int64_t>& order) const {
  order.resize(static_cast<size_t>(shard_count_));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle_) return;
  Rng rng(mix_seed(seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(rank_)));
  for (int64_t i = shard_count_ - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
}

int64_t Sampler::batch_size(int64_t b) const { return std::min(batch_, shard_count_ - b * batch_); }

}  // namespace hpctrain
