// Portable, seedable random numbers. The standard library's distributions differ
// between implementations, so everything that must be reproducible (init, shuffles)
// goes through this generator: xoshiro256** seeded with SplitMix64.
// Not thread-safe: one generator per user.
#pragma once

#include <cstdint>

namespace hpctrain {

// Mixes several 64-bit words into one seed (e.g. seed, epoch, rank).
uint64_t mix_seed(uint64_t a, uint64_t b = 0, uint64_t c = 0);

class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t next_u64();
  // Uniform integer in [0, bound), unbiased (Lemire's method). bound > 0.
  uint64_t uniform_int(uint64_t bound);
  // Uniform float in [0, 1).
  double uniform();
  // Standard normal (Box-Muller).
  double normal();

 private:
  uint64_t s_[4];
};

}  // namespace hpctrain
