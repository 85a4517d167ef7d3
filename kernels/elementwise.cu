// Element-wise kernels: grid-stride loops, one element per thread per iteration (the
// binary operations on activations: one 16-byte pack, kernels/pack.cuh, where the count
// and addresses allow). An activation result is one float operation on the widened
// operands, rounded once when stored (kernels/act.cuh): the CPU backend's result bit for
// bit.
#include <cuda_fp16.h>

#include "core/op_params.hpp"
#include "core/random.hpp"
#include "kernels/act.cuh"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"
#include "kernels/pack.cuh"

namespace hpctrain::kernels {
namespace {

template <typename T>
__global__ void convert_kernel(const float* src, T* dst, size_t n) {
  HT_GRID_STRIDE(i, n) { dst[i] = to_act<T>(src[i]); }
}

template <typename T>
__global__ void convert_to_float_kernel(const T* src, float* dst, size_t n) {
  HT_GRID_STRIDE(i, n) { dst[i] = as_float(src[i]); }
}

template <typename T>
__global__ void add_bias_kernel(T* y, const float* bias, size_t total, int cols) {
  HT_GRID_STRIDE(i, total) { y[i] = to_act<T>(as_float(y[i]) + bias[i % cols]); }
}

template <typename T>
__global__ void add_channel_bias_kernel(T* y, const float* bias, size_t total, int c, int hw) {
  HT_GRID_STRIDE(i, total) { y[i] = to_act<T>(as_float(y[i]) + bias[(i / hw) % c]); }
}

// Decoded value v of element i, normalised as InputNorm says: two separately rounded float
// operations (never fused into one), as the host computes them.
__device__ inline float normalized(float v, size_t i, const InputNorm& norm) {
  if (norm.mean == nullptr) return v;
  const size_t c = (i / norm.plane) % static_cast<size_t>(norm.channels);
  return __fmul_rn(__fsub_rn(v, norm.mean[c]), norm.inv_std[c]);
}

template <typename T>
__global__ void decode_u8_kernel(const uint8_t* in, size_t n, float scale, InputNorm norm, T* out) {
  HT_GRID_STRIDE(i, n) {
    out[i] = to_act<T>(normalized(__fmul_rn(static_cast<float>(in[i]), scale), i, norm));
  }
}

// Half to float is exact (every half is a float); the float is then rounded to T.
template <typename T>
__global__ void decode_f16_kernel(const uint16_t* in, size_t n, InputNorm norm, T* out) {
  HT_GRID_STRIDE(i, n) {
    out[i] = to_act<T>(normalized(__half2float(__ushort_as_half(in[i])), i, norm));
  }
}

template <typename T>
__global__ void decode_f32_kernel(const float* in, size_t n, InputNorm norm, T* out) {
  HT_GRID_STRIDE(i, n) { out[i] = to_act<T>(normalized(in[i], i, norm)); }
}

// Token ids: exact in float32 below 2^24; the embedding layer refuses vocabularies that
// the 16-bit types cannot hold exactly.
template <typename T>
__global__ void decode_i32_kernel(const int32_t* in, size_t n, T* out) {
  HT_GRID_STRIDE(i, n) { out[i] = to_act<T>(static_cast<float>(in[i])); }
}

// y = op(a, b) on activations (relu: b is a).
struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MultiplyOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct ReluOp {
  __device__ float operator()(float x, float /*x*/) const { return x > 0.0f ? x : 0.0f; }
};
struct ReluGradOp {  // a = y, b = dy
  __device__ float operator()(float y, float dy) const { return y > 0.0f ? dy : 0.0f; }
};

template <typename T, int V, typename Op>
__global__ void binary_kernel(const T* a, const T* b, T* y, size_t packs, Op op) {
  HT_GRID_STRIDE(i, packs) {
    float av[V], bv[V];
    load<T, V>(a + i * V, av);
    load<T, V>(b + i * V, bv);
#pragma unroll
    for (int j = 0; j < V; ++j) av[j] = op(av[j], bv[j]);
    store<T, V>(y + i * V, av);
  }
}

__global__ void scale_kernel(float* x, size_t n, float alpha) {
  HT_GRID_STRIDE(i, n) { x[i] *= alpha; }
}

__global__ void accumulate_kernel(float* sum, const float* x, size_t n) {
  HT_GRID_STRIDE(i, n) { sum[i] += x[i]; }
}

// y multiplies x by the mask as stored (1 / (1 - p) rounded to T), as backward's
// multiply(dy, mask) does.
template <typename T>
__global__ void dropout_kernel(const T* x, T* y, T* mask, size_t n, float p, float keep_scale,
                               uint64_t seed) {
  HT_GRID_STRIDE(i, n) {
    const T m = to_act<T>(counter_uniform(seed, i) >= p ? keep_scale : 0.0f);
    mask[i] = m;
    y[i] = to_act<T>(as_float(x[i]) * as_float(m));
  }
}

// The CPU backend's three SGD variants in one kernel; mu == 0 leaves velocity untouched.
// A step whose loss-scaled gradients overflowed (*skip != 0) changes nothing: the flag is
// read here rather than on the host, so the step loop never waits for the device.
__global__ void sgd_kernel(float* params, const float* grads, float* velocity, size_t n, float lr,
                           float mu, float wd, bool nesterov, const float* skip) {
  if (skip != nullptr && *skip != 0.0f) return;
  HT_GRID_STRIDE(i, n) {
    const float p = params[i];
    if (mu == 0.0f) {
      params[i] = p - lr * (grads[i] + wd * p);
    } else if (nesterov) {
      const float g = grads[i] + wd * p;
      const float v = mu * velocity[i] + g;
      velocity[i] = v;
      params[i] = p - lr * (g + mu * v);
    } else {
      const float v = mu * velocity[i] + grads[i] + wd * p;
      velocity[i] = v;
      params[i] = p - lr * v;
    }
  }
}

// Adam and AdamW (Backend::adam_update). Each thread derives the step's scalars from the
// step counter in device memory, which count_step_kernel advanced before this launch.
__global__ void adam_kernel(float* params, const float* grads, float* m, float* v, size_t n,
                            AdamParams adam, const float* step, const float* skip) {
  if (skip != nullptr && *skip != 0.0f) return;
  const AdamCoefficients c = adam_coefficients(adam, *step);
  HT_GRID_STRIDE(i, n) adam_element(c, params[i], grads[i], m[i], v[i]);
}

__global__ void count_step_kernel(float* counter, const float* skip) {
  if (skip == nullptr || *skip == 0.0f) *counter += 1.0f;
}

// Every thread that meets a non-finite gradient writes the same 1 to kFoundInf (a benign
// race with one possible outcome), which stays set across a step's calls until
// update_loss_scale clears it: no reduction, and the result does not depend on timing.
__global__ void unscale_kernel(float* grads, size_t n, float* state) {
  const float inv = 1.0f / state[LossScaleState::kScale];
  HT_GRID_STRIDE(i, n) {
    const float g = grads[i] * inv;
    grads[i] = g;
    if (!isfinite(g)) state[LossScaleState::kFoundInf] = 1.0f;
  }
}

// One thread: a handful of scalar updates.
__global__ void update_loss_scale_kernel(float* state, float growth, float backoff, int interval) {
  if (state[LossScaleState::kFoundInf] != 0.0f) {
    state[LossScaleState::kScale] *= backoff;
    state[LossScaleState::kGood] = 0.0f;
    state[LossScaleState::kSkipped] += 1.0f;
  } else {
    state[LossScaleState::kGood] += 1.0f;
    if (state[LossScaleState::kGood] >= static_cast<float>(interval)) {
      state[LossScaleState::kScale] *= growth;
      state[LossScaleState::kGood] = 0.0f;
    }
  }
  state[LossScaleState::kFoundInf] = 0.0f;
}

__global__ void merge_loss_stats_kernel(LossStats* into, LossStats* step, const float* skip) {
  if (*skip == 0.0f) {
    into->loss_sum += step->loss_sum;
    into->correct += step->correct;
    into->count += step->count;
  }
  *step = LossStats{};
}

template <typename Op>
void binary(DType t, const void* a, const void* b, void* y, size_t n, const char* name,
            cudaStream_t stream) {
  if (n == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    with_pack<T>(pack_values<T>(n, {a, b, y}), [&](auto values) {
      constexpr int V = decltype(values)::value;
      binary_kernel<T, V><<<grid_for(n / V), kBlock, 0, stream>>>(
          static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), n / V, Op{});
    });
  });
  check_launch(name);
}

}  // namespace

void convert(DType t, const float* src, void* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    convert_kernel<<<grid_for(n), kBlock, 0, stream>>>(src, static_cast<T*>(dst), n);
  });
  check_launch("convert");
}

void convert_to_float(DType t, const void* src, float* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    convert_to_float_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const T*>(src), dst, n);
  });
  check_launch("convert_to_float");
}

void add_bias(DType t, void* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    add_bias_kernel<<<grid_for(total), kBlock, 0, stream>>>(static_cast<T*>(y), bias, total, cols);
  });
  check_launch("add_bias");
}

void add_channel_bias(DType t, void* y, const float* bias, int n, int c, int hw,
                      cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * c * hw;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    add_channel_bias_kernel<<<grid_for(total), kBlock, 0, stream>>>(static_cast<T*>(y), bias, total,
                                                                    c, hw);
  });
  check_launch("add_channel_bias");
}

void add(DType t, const void* a, const void* b, void* y, size_t n, cudaStream_t stream) {
  binary<AddOp>(t, a, b, y, n, "add", stream);
}

void multiply(DType t, const void* a, const void* b, void* y, size_t n, cudaStream_t stream) {
  binary<MultiplyOp>(t, a, b, y, n, "multiply", stream);
}

void decode_u8(DType t, const uint8_t* in, size_t n, float scale, const InputNorm& norm, void* out,
               cudaStream_t stream) {
  if (n == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    decode_u8_kernel<<<grid_for(n), kBlock, 0, stream>>>(in, n, scale, norm, static_cast<T*>(out));
  });
  check_launch("decode_u8");
}

void decode_f16(DType t, const uint16_t* in, size_t n, const InputNorm& norm, void* out,
                cudaStream_t stream) {
  if (n == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    decode_f16_kernel<<<grid_for(n), kBlock, 0, stream>>>(in, n, norm, static_cast<T*>(out));
  });
  check_launch("decode_f16");
}

void decode_f32(DType t, const float* in, size_t n, const InputNorm& norm, void* out,
                cudaStream_t stream) {
  if (n == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    decode_f32_kernel<<<grid_for(n), kBlock, 0, stream>>>(in, n, norm, static_cast<T*>(out));
  });
  check_launch("decode_f32");
}

void decode_i32(DType t, const int32_t* in, size_t n, void* out, cudaStream_t stream) {
  if (n == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    decode_i32_kernel<<<grid_for(n), kBlock, 0, stream>>>(in, n, static_cast<T*>(out));
  });
  check_launch("decode_i32");
}

void relu_forward(DType t, const void* x, void* y, size_t n, cudaStream_t stream) {
  binary<ReluOp>(t, x, x, y, n, "relu_forward", stream);
}

void relu_backward(DType t, const void* y, const void* dy, void* dx, size_t n,
                   cudaStream_t stream) {
  binary<ReluGradOp>(t, y, dy, dx, n, "relu_backward", stream);
}

void scale(float* x, size_t n, float alpha, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, n, alpha);
  check_launch("scale");
}

void accumulate(float* sum, const float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  accumulate_kernel<<<grid_for(n), kBlock, 0, stream>>>(sum, x, n);
  check_launch("accumulate");
}

void dropout_forward(DType t, const void* x, void* y, void* mask, size_t n, float p, uint64_t seed,
                     cudaStream_t stream) {
  if (n == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    dropout_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                       static_cast<T*>(mask), n, p,
                                                       1.0f / (1.0f - p), seed);
  });
  check_launch("dropout_forward");
}

void sgd_update(float* params, const float* grads, float* velocity, size_t n, const SgdParams& sgd,
                const float* skip, cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<grid_for(n), kBlock, 0, stream>>>(params, grads, velocity, n, sgd.lr, sgd.momentum,
                                                 sgd.weight_decay, sgd.nesterov, skip);
  check_launch("sgd_update");
}

void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                 const AdamParams& adam, const float* step, const float* skip,
                 cudaStream_t stream) {
  if (n == 0) return;
  adam_kernel<<<grid_for(n), kBlock, 0, stream>>>(params, grads, m, v, n, adam, step, skip);
  check_launch("adam_update");
}

void count_step(float* counter, const float* skip, cudaStream_t stream) {
  count_step_kernel<<<1, 1, 0, stream>>>(counter, skip);
  check_launch("count_step");
}

void unscale_grads(float* grads, size_t n, float* state, cudaStream_t stream) {
  if (n == 0) return;
  unscale_kernel<<<grid_for(n), kBlock, 0, stream>>>(grads, n, state);
  check_launch("unscale_grads");
}

void update_loss_scale(float* state, float growth, float backoff, int interval,
                       cudaStream_t stream) {
  update_loss_scale_kernel<<<1, 1, 0, stream>>>(state, growth, backoff, interval);
  check_launch("update_loss_scale");
}

void merge_loss_stats(LossStats* into, LossStats* step, const float* skip, cudaStream_t stream) {
  merge_loss_stats_kernel<<<1, 1, 0, stream>>>(into, step, skip);
  check_launch("merge_loss_stats");
}

}  // namespace hpctrain::kernels
