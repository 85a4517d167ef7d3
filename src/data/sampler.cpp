// Sharding and per-epoch shuffles (Fisher-Yates over the portable Rng).
#include "data/sampler.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/random.hpp"

namespace hpctrain {

std::vector<int64_t> apportion(int64_t n, const std::vector<int64_t>& weights) {
  HT_REQUIRE(n >= 0 && !weights.empty(), "apportion: bad arguments");
  int64_t total = 0;
  for (int64_t w : weights) {
    HT_REQUIRE(w >= 0 && w <= (int64_t{1} << 30), "apportion: weight out of range");
    total += w;
  }
  HT_REQUIRE(total > 0 && total <= (int64_t{1} << 31),
             "apportion: weights add up to 0 or too much");
  // n * w / total without overflow: (n / total) * w + (n % total) * w / total, where
  // (n % total) * w < 2^61.
  const int64_t whole = n / total, rest = n % total;
  std::vector<int64_t> counts(weights.size()), remainder(weights.size());
  int64_t given = 0;
  for (size_t p = 0; p < weights.size(); ++p) {
    counts[p] = whole * weights[p] + rest * weights[p] / total;
    remainder[p] = rest * weights[p] % total;
    given += counts[p];
  }
  std::vector<size_t> by_remainder(weights.size());
  std::iota(by_remainder.begin(), by_remainder.end(), size_t{0});
  std::stable_sort(by_remainder.begin(), by_remainder.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  // Fewer leftovers than parts: each floor lost less than one.
  for (int64_t i = 0; i < n - given; ++i) ++counts[by_remainder[static_cast<size_t>(i)]];
  return counts;
}

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
