// Synthetic images: class templates are coarse random grids upsampled bilinearly (smooth,
// so a shifted copy still resembles its class and a small convolutional network or an MLP
// can learn them); each sample adds an integer shift and roughly Gaussian noise. Rows are
// generated on a few threads, each row from its own seeded stream.
#include "data-tools/synth.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/progress_note.hpp"
#include "data-tools/sample_codec.hpp"

namespace hpctrain {
namespace {

constexpr int64_t kGrid = 8;   // template cells per side
constexpr float kLow = 0.15f;  // template values lie in [kLow, kLow + kRange]
constexpr float kRange = 0.7f;
constexpr float kNoiseSigma = 0.2f;                    // per-pixel noise
constexpr int64_t kShiftDivisor = 16;                  // shifts up to size / 16 pixels each way
constexpr uint64_t kTemplateStream = 0x74656d706cULL;  // "templ"
constexpr uint64_t kSampleStream = 0x73616d706cULL;    // "sampl"

// Approximately standard normal from one 64-bit draw: the sum of four 16-bit uniforms
// (Irwin-Hall), scaled to unit variance. Cheaper than Box-Muller by far, which matters
// for millions of pixels, and exactly reproducible.
float fast_normal(Rng& rng) {
  const uint64_t r = rng.next_u64();
  const auto sum =
      static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  constexpr float kMean = 4 * 32767.5f;
  constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16: unit variance
  return (sum - kMean) * kScale;
}

// Grid coordinate of pixel `p` (shifted by `shift`) on an axis of `size` pixels, clamped
// to the grid, split into a cell index and the weight of the next cell.
void grid_coordinate(int64_t p, int64_t shift, int64_t size, int64_t* cell, float* frac) {
  const float g = (static_cast<float>(p + shift) + 0.5f) * static_cast<float>(kGrid) /
                      static_cast<float>(size) -
                  0.5f;
  const float clamped = std::clamp(g, 0.0f, static_cast<float>(kGrid - 1));
  *cell = std::min<int64_t>(static_cast<int64_t>(clamped), kGrid - 2);
  *frac = clamped - static_cast<float>(*cell);
}

}  // namespace

SynthGenerator::SynthGenerator(const SynthOptions& options) : options_(options) {
  HT_REQUIRE(options_.classes >= 1 && options_.c >= 1 && options_.h >= 1 && options_.w >= 1,
             "SynthGenerator: bad shape or classes");
  max_shift_y_ = options_.h / kShiftDivisor;
  max_shift_x_ = options_.w / kShiftDivisor;
  Rng rng(mix_seed(options_.seed, kTemplateStream));
  grids_.resize(static_cast<size_t>(options_.classes * options_.c * kGrid * kGrid));
  for (float& v : grids_) v = kLow + kRange * static_cast<float>(rng.uniform());
}

int32_t SynthGenerator::label(int64_t index) const {
  return static_cast<int32_t>(index % options_.classes);
}

void SynthGenerator::sample(int64_t index, float* chw) const {
  Rng rng(mix_seed(options_.seed, static_cast<uint64_t>(index), kSampleStream));
  const int64_t dy =
      static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(2 * max_shift_y_ + 1))) -
      max_shift_y_;
  const int64_t dx =
      static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(2 * max_shift_x_ + 1))) -
      max_shift_x_;
  // Column weights once per sample; rows then cost four loads and a few multiplies a pixel.
  std::vector<int64_t> x_cell(static_cast<size_t>(options_.w));
  std::vector<float> x_frac(static_cast<size_t>(options_.w));
  for (int64_t x = 0; x < options_.w; ++x) {
    grid_coordinate(x, dx, options_.w, &x_cell[static_cast<size_t>(x)],
                    &x_frac[static_cast<size_t>(x)]);
  }
  const int64_t k = label(index);
  float* out = chw;
  for (int64_t ch = 0; ch < options_.c; ++ch) {
    const float* grid = grids_.data() + static_cast<size_t>((k * options_.c + ch) * kGrid * kGrid);
    for (int64_t y = 0; y < options_.h; ++y) {
      int64_t cy = 0;
      float fy = 0.0f;
      grid_coordinate(y, dy, options_.h, &cy, &fy);
      const float* row0 = grid + cy * kGrid;
      const float* row1 = row0 + kGrid;
      for (int64_t x = 0; x < options_.w; ++x) {
        const int64_t cx = x_cell[static_cast<size_t>(x)];
        const float fx = x_frac[static_cast<size_t>(x)];
        const float top = row0[cx] + fx * (row0[cx + 1] - row0[cx]);
        const float bottom = row1[cx] + fx * (row1[cx + 1] - row1[cx]);
        const float v = top + fy * (bottom - top) + kNoiseSigma * fast_normal(rng);
        *out++ = std::clamp(v, 0.0f, 1.0f);
      }
    }
  }
}

std::string SynthGenerator::describe() const {
  return "synthetic images by hpctrain-data synth (seed " + std::to_string(options_.seed) +
         "): per class and channel a random 8x8 grid of values in [0.15, 0.85], bilinearly "
         "upsampled; a sample is its class's template shifted by up to " +
         std::to_string(max_shift_y_) + " rows and " + std::to_string(max_shift_x_) +
         " columns, plus noise of sigma 0.2, clamped to [0, 1]; label = row % " +
         std::to_string(options_.classes);
}

void synth_data_file(const std::string& out, const SynthOptions& options) {
  if (options.n < 1) throw UsageError(out + ": --n must be at least 1");
  if (options.classes < 2) throw UsageError(out + ": --classes must be at least 2");
  if (options.c < 1 || options.h < 1 || options.w < 1 || options.c > 65536 || options.h > 65536 ||
      options.w > 65536) {
    throw UsageError(out + ": sample shape must be positive, at most 65536 per side");
  }
  check_sample_bytes(options.c * options.h * options.w, options.type, out);
  const SynthGenerator gen(options);
  DatasetWriterOptions wo;
  wo.type = options.type;
  wo.c = options.c;
  wo.h = options.h;
  wo.w = options.w;
  wo.num_classes = options.classes;
  for (int k = 0; k < options.classes; ++k) wo.class_names.push_back("class" + std::to_string(k));
  wo.source = gen.describe();
  wo.deflate_level = options.deflate_level;
  DatasetWriter writer(out, wo);

  const int64_t elems = options.c * options.h * options.w;
  const size_t type_size = sample_type_size(options.type);
  const int64_t batch =
      std::min(options.n, stream_batch_rows(elems * static_cast<int64_t>(type_size)));
  const int threads = static_cast<int>(std::clamp<int64_t>(options.threads, 1, batch));
  std::vector<uint8_t> samples(static_cast<size_t>(batch * elems) * type_size);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  ProgressNote note("writing " + out, options.n);
  for (int64_t start = 0; start < options.n; start += batch) {
    note.update(start);
    const int64_t count = std::min(batch, options.n - start);
    // Rows are independent (each seeds its own Rng), so threads take them in any order
    // and the batch comes out the same.
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr failure;  // written once, by the thread that set `failed`
    auto work = [&] {
      try {
        std::vector<float> pixels(static_cast<size_t>(elems));
        for (int64_t i = next++; i < count && !failed; i = next++) {
          gen.sample(start + i, pixels.data());
          encode_unit_pixels(pixels.data(), static_cast<size_t>(elems), options.type,
                             samples.data() + static_cast<size_t>(i * elems) * type_size);
          labels[static_cast<size_t>(i)] = gen.label(start + i);
        }
      } catch (...) {  // (an exception leaving a thread would terminate the process)
        if (!failed.exchange(true)) failure = std::current_exception();
      }
    };
    {
      std::vector<std::jthread> pool;
      for (int t = 1; t < threads; ++t) pool.emplace_back(work);
      work();
    }  // joins
    if (failure) std::rethrow_exception(failure);
    writer.append(count, samples.data(), labels.data());
  }
  writer.close();
}

}  // namespace hpctrain
