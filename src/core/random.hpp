// Portable, seedable random numbers. The standard library's distributions differ
// between implementations, so everything that must be reproducible (init, shuffles)
// goes through this generator: xoshiro256** seeded with SplitMix64.
// Not thread-safe: one generator per user.
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace hpctrain {

// Mixes several 64-bit words into one seed (e.g. seed, epoch, rank).
uint64_t mix_seed(uint64_t a, uint64_t b = 0, uint64_t c = 0);

// Counter-based uniform float in [0, 1): the i-th draw of stream `seed`, a pure function
// of both (SplitMix64's finaliser), so draws can be made in any order or in parallel, on
// any device, with the same result. 24 bits of resolution.
HT_HOST_DEVICE constexpr float counter_uniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f;
}

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
