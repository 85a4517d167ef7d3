// Host conversions between float32 and the activation types (core/dtype.hpp). They round
// to nearest even, as the GPU's __float2bfloat16_rn / __float2half_rn do, so a CPU and a
// GPU that compute the same float store the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "core/half.hpp"

namespace hpctrain {

// Exact: a bfloat16 is the top half of a float32.
inline float bf16_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

// Rounds to nearest, ties to even; overflow rounds to inf; NaN stays NaN (quieted).
inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// n values of type t at `src` to floats, and back (host memory).
inline void to_float(DType t, const void* src, float* dst, size_t n) {
  if (t == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  const auto* s = static_cast<const uint16_t*>(src);
  if (t == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
  } else {
    half_to_float_n(s, dst, n);
  }
}

inline void from_float(DType t, const float* src, void* dst, size_t n) {
  if (t == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  auto* d = static_cast<uint16_t*>(dst);
  if (t == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
  } else {
    float_to_half_n(src, d, n);
  }
}

// The float nearest to f among the values of type t (what storing f as t keeps).
inline float round_to(DType t, float f) {
  if (t == DType::kBF16) return bf16_to_float(float_to_bf16(f));
  if (t == DType::kF16) return half_to_float(float_to_half(f));
  return f;
}

}  // namespace hpctrain
