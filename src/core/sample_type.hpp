// How input samples are stored (a data file's element type) and how they become the
// floats a model reads: uint8 v as v * (1/255), float16 exactly, float32 as is. The
// loader decodes on the host; a device backend decodes the stored bytes it uploaded
// (Backend::decode_input) with the same arithmetic, so both give the same floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/half.hpp"

namespace hpctrain {

enum class SampleType { kU8, kF16, kF32 };

// "uint8", "float16", "float32": the names hpctrain-data's --dtype takes.
inline const char* to_string(SampleType t) {
  return t == SampleType::kU8 ? "uint8" : t == SampleType::kF16 ? "float16" : "float32";
}

constexpr size_t sample_type_size(SampleType t) {
  return t == SampleType::kU8 ? 1 : t == SampleType::kF16 ? 2 : 4;
}

// The scale of uint8 samples.
inline constexpr float kU8Scale = 1.0f / 255.0f;

// Decodes n stored values at `src` into `dst` (host memory).
inline void decode_samples(const void* src, SampleType type, size_t n, float* dst) {
  switch (type) {
    case SampleType::kU8: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]) * kU8Scale;
      return;
    }
    case SampleType::kF16:
      half_to_float_n(static_cast<const uint16_t*>(src), dst, n);
      return;
    case SampleType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
  }
}

}  // namespace hpctrain
