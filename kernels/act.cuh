// Activations in kernels: each kernel that reads or writes activations is a template on
// their element type (float, __nv_bfloat16 or __half), loads them as float, computes in
// float and stores its results rounded to nearest even, as the CPU backend does on the
// host. For float the helpers are the identity, so float32 runs compute what they always
// did. with_act_type maps a run-time DType to the template's instantiation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/dtype.hpp"

namespace hpctrain::kernels {

__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float as_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T to_act(float v);
template <>
__device__ __forceinline__ float to_act<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 to_act<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half to_act<__half>(float v) {
  return __float2half_rn(v);
}

// Names an element type without constructing a value of it.
template <typename T>
struct ActType {
  using type = T;
};

// Calls f(ActType<T>{}) with T the element type of t (host side, around a launch).
template <typename F>
void with_act_type(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      f(ActType<float>{});
      return;
    case DType::kBF16:
      f(ActType<__nv_bfloat16>{});
      return;
    case DType::kF16:
      f(ActType<__half>{});
      return;
  }
}

}  // namespace hpctrain::kernels
