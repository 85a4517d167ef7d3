// Shared by the converters that make pixels (image_folder, synth): parsing a sample type
// name, encoding float pixels in [0, 1] into a stored sample type, and how many rows one
// streamed batch holds so that converters run in bounded memory.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "data/dataset_file.hpp"

namespace hpctrain {

// Bytes of samples a converter buffers per append: large enough for few HDF5 calls, small
// enough that memory stays flat whatever the data set's size.
constexpr int64_t kStreamBatchBytes = int64_t{16} << 20;

// Rows per streamed batch for samples of `sample_bytes`: at least 1, at most 4096.
inline int64_t stream_batch_rows(int64_t sample_bytes) {
  return std::clamp<int64_t>(kStreamBatchBytes / std::max<int64_t>(sample_bytes, 1), 1, 4096);
}

// Parses "AxBx..." (e.g. "64x48", "1x148x197") into `count` positive sizes, each at most
// 65536; `what` names the option in the error.
inline std::vector<int64_t> parse_x_dims(const std::string& text, size_t count,
                                         const std::string& what, const std::string& form) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (true) {
    const size_t end = text.find('x', pos);
    const std::string part = text.substr(pos, end == std::string::npos ? end : end - pos);
    const bool digits = !part.empty() && part.size() <= 6 &&
                        part.find_first_not_of("0123456789") == std::string::npos;
    const int64_t v = digits ? std::stoll(part) : 0;
    if (v < 1 || v > 65536) {
      throw UsageError(what + ": expected " + form + " with sizes in [1, 65536], got '" + text +
                       "'");
    }
    dims.push_back(v);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  if (dims.size() != count) {
    throw UsageError(what + ": expected " + form + ", got '" + text + "'");
  }
  return dims;
}

// Converters buffer whole samples and HDF5 chunks hold at least one (chunks are limited to
// 4 GiB): refuse samples over 1 GiB with a UsageError naming `what` (the output file).
inline void check_sample_bytes(int64_t elems, SampleType type, const std::string& what) {
  constexpr int64_t kMaxSampleBytes = int64_t{1} << 30;
  if (elems > kMaxSampleBytes / static_cast<int64_t>(sample_type_size(type))) {
    throw UsageError(what + ": one sample of " + std::to_string(elems) + " " + to_string(type) +
                     " values is over the 1 GiB limit");
  }
}

// "uint8" | "float16" | "float32" (what `what`, e.g. "--dtype", names in the error).
inline SampleType parse_sample_type(const std::string& text, const std::string& what) {
  if (text == "uint8") return SampleType::kU8;
  if (text == "float16") return SampleType::kF16;
  if (text == "float32") return SampleType::kF32;
  throw UsageError(what + ": expected uint8, float16 or float32, got '" + text + "'");
}

// float_to_half for |f| in [2^-14, 65504) (normal halves): adding 0xfff plus the lowest
// kept bit carries into bit 13 exactly when round-to-nearest-even rounds up, so this equals
// float_to_half there, without its branches (the converters' hot loop).
inline uint16_t normal_float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t ax = x & 0x7fffffffu;
  return static_cast<uint16_t>(((x >> 16) & 0x8000u) |
                               ((ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13));
}

// Writes n pixels, clamped to [0, 1] (resampling filters overshoot), as `type` into `dst`
// (n elements of the type): uint8 as round(255 v) (halves up), float16 as raw bits.
inline void encode_unit_pixels(const float* src, size_t n, SampleType type, void* dst) {
  switch (type) {
    case SampleType::kU8: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) {
        out[i] = static_cast<uint8_t>(std::clamp(src[i], 0.0f, 1.0f) * 255.0f + 0.5f);
      }
      return;
    }
    case SampleType::kF16: {
      auto* out = static_cast<uint16_t*>(dst);
      constexpr float kSmallestNormal = 0x1.0p-14f;
      for (size_t i = 0; i < n; ++i) {
        const float v = std::clamp(src[i], 0.0f, 1.0f);
        out[i] = v >= kSmallestNormal ? normal_float_to_half(v) : float_to_half(v);
      }
      return;
    }
    case SampleType::kF32: {
      auto* out = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = std::clamp(src[i], 0.0f, 1.0f);
      return;
    }
    case SampleType::kToken:  // token ids are not pixels
      break;
  }
}

}  // namespace hpctrain
