// Element-wise kernels: grid-stride loops, one element per thread per iteration.
#include <cuda_fp16.h>

#include "backend/backend.hpp"
#include "core/random.hpp"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain::kernels {
namespace {

#define HT_GRID_STRIDE(i, n)                                                           \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void add_bias_kernel(float* y, const float* bias, size_t total, int cols) {
  HT_GRID_STRIDE(i, total) { y[i] += bias[i % cols]; }
}

__global__ void add_channel_bias_kernel(float* y, const float* bias, size_t total, int c, int hw) {
  HT_GRID_STRIDE(i, total) { y[i] += bias[(i / hw) % c]; }
}

__global__ void decode_u8_kernel(const uint8_t* in, size_t n, float scale, float* out) {
  HT_GRID_STRIDE(i, n) { out[i] = static_cast<float>(in[i]) * scale; }
}

// Half to float: exact, every half is a float.
__global__ void decode_f16_kernel(const uint16_t* in, size_t n, float* out) {
  HT_GRID_STRIDE(i, n) { out[i] = __half2float(__ushort_as_half(in[i])); }
}

__global__ void add_kernel(const float* a, const float* b, float* y, size_t n) {
  HT_GRID_STRIDE(i, n) { y[i] = a[i] + b[i]; }
}

__global__ void multiply_kernel(const float* a, const float* b, float* y, size_t n) {
  HT_GRID_STRIDE(i, n) { y[i] = a[i] * b[i]; }
}

__global__ void relu_forward_kernel(const float* x, float* y, size_t n) {
  HT_GRID_STRIDE(i, n) { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, size_t n) {
  HT_GRID_STRIDE(i, n) { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; }
}

__global__ void scale_kernel(float* x, size_t n, float alpha) {
  HT_GRID_STRIDE(i, n) { x[i] *= alpha; }
}

__global__ void dropout_kernel(const float* x, float* y, float* mask, size_t n, float p,
                               float keep_scale, uint64_t seed) {
  HT_GRID_STRIDE(i, n) {
    const float m = counter_uniform(seed, i) >= p ? keep_scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

// The CPU backend's three SGD variants in one kernel; mu == 0 leaves velocity untouched.
__global__ void sgd_kernel(float* params, const float* grads, float* velocity, size_t n, float lr,
                           float mu, float wd, bool nesterov) {
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

#undef HT_GRID_STRIDE

}  // namespace

void add_bias(float* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return;
  add_bias_kernel<<<grid_for(total), kBlock, 0, stream>>>(y, bias, total, cols);
  check_launch("add_bias");
}

void add_channel_bias(float* y, const float* bias, int n, int c, int hw, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * c * hw;
  if (total == 0) return;
  add_channel_bias_kernel<<<grid_for(total), kBlock, 0, stream>>>(y, bias, total, c, hw);
  check_launch("add_channel_bias");
}

void add(const float* a, const float* b, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<grid_for(n), kBlock, 0, stream>>>(a, b, y, n);
  check_launch("add");
}

void multiply(const float* a, const float* b, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  multiply_kernel<<<grid_for(n), kBlock, 0, stream>>>(a, b, y, n);
  check_launch("multiply");
}

void decode_u8(const uint8_t* in, size_t n, float scale, float* out, cudaStream_t stream) {
  if (n == 0) return;
  decode_u8_kernel<<<grid_for(n), kBlock, 0, stream>>>(in, n, scale, out);
  check_launch("decode_u8");
}

void decode_f16(const uint16_t* in, size_t n, float* out, cudaStream_t stream) {
  if (n == 0) return;
  decode_f16_kernel<<<grid_for(n), kBlock, 0, stream>>>(in, n, out);
  check_launch("decode_f16");
}

void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  relu_forward_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, y, n);
  check_launch("relu_forward");
}

void relu_backward(const float* y, const float* dy, float* dx, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  relu_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, dy, dx, n);
  check_launch("relu_backward");
}

void scale(float* x, size_t n, float alpha, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, n, alpha);
  check_launch("scale");
}

void dropout_forward(const float* x, float* y, float* mask, size_t n, float p, uint64_t seed,
                     cudaStream_t stream) {
  if (n == 0) return;
  dropout_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, y, mask, n, p, 1.0f / (1.0f - p), seed);
  check_launch("dropout_forward");
}

void sgd_update(float* params, const float* grads, float* velocity, size_t n, const SgdParams& sgd,
                cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<grid_for(n), kBlock, 0, stream>>>(params, grads, velocity, n, sgd.lr, sgd.momentum,
                                                 sgd.weight_decay, sgd.nesterov);
  check_launch("sgd_update");
}

}  // namespace hpctrain::kernels
