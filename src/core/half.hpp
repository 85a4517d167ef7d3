// IEEE 754 binary16 ("float16", the format's f16 sample type) <-> float32.
// The scalar conversions are exact bit manipulation on integers, so they do not depend on
// the FPU's flush-to-zero/denormals-are-zero modes; float -> half rounds to nearest even.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace hpctrain {

// Exact: every binary16 value (subnormals, infinities, NaN payloads) has a float32 image.
constexpr float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // inf, or NaN keeping its payload (and so its quiet bit)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {  // normal: rebias the exponent from 15 to 127
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);  // +-0
  // Subnormal m * 2^-24 is a float32 normal: shift the leading one into the hidden bit.
  int e = 113;  // the float32 biased exponent of 2^-14, lowered by each shift
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(e) << 23) |
                              ((mantissa & 0x3ffu) << 13));
}

// Rounds to nearest, ties to even; overflows to inf, underflows through the subnormals to
// zero; NaN stays NaN (quieted, top payload bits kept).
constexpr uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16: rounds up.
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax >= 0x38800000u) {                  // >= 2^-14: a normal half
    uint32_t h = (ax - 0x38000000u) >> 13;  // rebias 127 -> 15, drop 13 mantissa bits
    const uint32_t rest = ax & 0x1fffu;
    // A carry out of the mantissa correctly bumps the exponent.
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Below 2^-25 (and 2^-25 itself, a tie with zero) rounds to zero.
  if (ax <= 0x33000000u) return sign;
  // Subnormal half: value * 2^24 rounded to an integer. With the hidden bit restored the
  // float is m * 2^(e - 150), so the half's mantissa is m >> (126 - e), shift in [14, 24].
  const uint32_t e = ax >> 23;
  const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1u) != 0)) ++h;  // may round up to 2^-14
  return static_cast<uint16_t>(sign | h);
}

// Every half's float, built once (256 KiB): a load per element beats the branches of
// half_to_float in the loader's per-batch loop.
inline const std::array<float, 65536>& half_to_float_table() {
  static const std::array<float, 65536> table = [] {
    std::array<float, 65536> t{};
    for (uint32_t h = 0; h < 65536; ++h) t[h] = half_to_float(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}

// Converts n halves to floats (the loader's f16 -> f32 step). Thread-safe.
inline void half_to_float_n(const uint16_t* src, float* dst, size_t n) {
  const float* table = half_to_float_table().data();
  for (size_t i = 0; i < n; ++i) dst[i] = table[src[i]];
}

#if defined(__x86_64__) && defined(__GNUC__)
// F16C's conversion (8 floats per instruction) rounds to nearest even with the same
// results as float_to_half, subnormals, infinities and NaN payloads included (it ignores
// MXCSR.FTZ; hpctrain never sets DAZ). Called only where the CPU has F16C.
__attribute__((target("avx,f16c"))) inline void float_to_half_n_f16c(const float* src,
                                                                     uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}
#endif

// Converts n floats to halves (16-bit activations on the CPU, float16 data files).
inline void float_to_half_n(const float* src, uint16_t* dst, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  // AVX usable (the CPU and the OS) and CPUID leaf 1's F16C bit (ECX bit 29): Clang's
  // __builtin_cpu_supports does not know "f16c".
  static const bool f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & (1u << 29)) != 0;
  }();
  if (f16c) {
    float_to_half_n_f16c(src, dst, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace hpctrain
