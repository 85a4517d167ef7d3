// A deterministic, learnable synthetic image set for benchmarks at real sizes without the
// real data: each class has a random smooth template; a sample is its class's template,
// shifted by a random offset, plus noise. Streamed into a data file in bounded memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset_file.hpp"

namespace hpctrain {

struct SynthOptions {
  int64_t n = 0;  // samples
  int64_t c = 1, h = 1, w = 1;
  int classes = 2;
  SampleType type = SampleType::kF16;
  uint64_t seed = 0;
  int deflate_level = 0;
  int threads = 1;  // generating threads (the output does not depend on it)
};

// The generator behind synth_data_file, exposed so tests can check it without a file.
// Sample i has label i % classes (every class equally often, also in any contiguous
// range) and pixels drawn from an Rng seeded with (seed, i) alone, so any row can be made
// on its own and the output does not depend on batching. sample() and label() may be
// called concurrently (they only read the templates).
class SynthGenerator {
 public:
  explicit SynthGenerator(const SynthOptions& options);

  int32_t label(int64_t index) const;
  // Writes sample `index` as c * h * w floats in [0, 1], [C, H, W].
  void sample(int64_t index, float* chw) const;

  // The generator's fixed parameters, recorded in the file's source attribute.
  std::string describe() const;

 private:
  SynthOptions options_;
  int64_t max_shift_y_ = 0, max_shift_x_ = 0;
  std::vector<float> grids_;  // [classes, c, kGrid, kGrid] values in [0, 1]
};

// Writes options.n samples to `out` (class names "class0", ...). Throws UsageError for
// bad options (n < 1, classes < 2, a sample type other than uint8/float16/float32).
void synth_data_file(const std::string& out, const SynthOptions& options);

}  // namespace hpctrain
