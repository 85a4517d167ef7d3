// How input samples are stored (a data file's element type) and how they become the
// floats a model reads: uint8 v as v * (1/255), float16 exactly, float32 as is, token ids
// (int32) as their value (exact below 2^24; an embedding layer reads them). The
// loader decodes on the host; a device backend decodes the stored bytes it uploaded
// (Backend::decode_input) with the same arithmetic, so both give the same floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/half.hpp"

namespace hpctrain {

enum class SampleType { kU8, kF16, kF32, kToken };

// "uint8", "float16", "float32" (the names hpctrain-data's --dtype takes), "int32" (tokens).
inline const char* to_string(SampleType t) {
  switch (t) {
    case SampleType::kU8:
      return "uint8";
    case SampleType::kF16:
      return "float16";
    case SampleType::kF32:
      return "float32";
    case SampleType::kToken:
      return "int32";
  }
  return "?";
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
    case SampleType::kToken: {
      const auto* s = static_cast<const int32_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
  }
}

}  // namespace hpctrain
