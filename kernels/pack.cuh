// Vector accesses for kernels over channels-last data: V adjacent values of type T moved
// as one access of V * sizeof(T) bytes (16 bytes: 8 16-bit values or 4 floats), widened to
// float on load and rounded to T on store (kernels/act.cuh).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/act.cuh"

namespace hpctrain::kernels {

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ void load(const T* p, float (&f)[V]) {
  const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j) f[j] = as_float(pk.v[j]);
}

template <typename T, int V>
__device__ __forceinline__ void store(T* p, const float (&f)[V]) {
  Pack<T, V> pk;
#pragma unroll
  for (int j = 0; j < V; ++j) pk.v[j] = to_act<T>(f[j]);
  *reinterpret_cast<Pack<T, V>*>(p) = pk;
}

// Values per access for rows of c values of type T at these addresses (or for c values in
// all): 16 bytes' worth when c is a multiple of it and every address (null counts as
// aligned) is 16-byte aligned, else 1.
template <typename T>
int pack_values(size_t c, std::initializer_list<const void*> data) {
  constexpr int kWide = static_cast<int>(16 / sizeof(T));
  if (c % kWide != 0) return 1;
  for (const void* d : data) {
    if (reinterpret_cast<uintptr_t>(d) % 16 != 0) return 1;
  }
  return kWide;
}

// Calls f(std::integral_constant<int, V>{}) for V = values (pack_values' result).
template <typename T, typename F>
void with_pack(int values, F&& f) {
  constexpr int kWide = static_cast<int>(16 / sizeof(T));
  if (values == kWide) {
    f(std::integral_constant<int, kWide>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

}  // namespace hpctrain::kernels
