// Gradient clipping by global norm (Backend::sum_squares, Backend::clip_by_norm): one block
// sums x^2 in double in a fixed order (each thread a strided share, then a tree over the
// threads), so the norm repeats bit for bit; the scale is applied on the device, read
// from the sum there, so the host never waits.
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain::kernels {
namespace {

__global__ void sum_squares_kernel(const float* x, size_t n, float* acc) {
  __shared__ double part[kBlock];
  double s = 0.0;
  for (size_t i = threadIdx.x; i < n; i += kBlock) s += static_cast<double>(x[i]) * x[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *acc = static_cast<float>(static_cast<double>(*acc) + part[0]);
}

__global__ void clip_by_norm_kernel(float* x, size_t n, const float* acc, float max_norm) {
  const float coef = max_norm / (sqrtf(*acc) + 1e-6f);
  if (coef >= 1.0f) return;
  HT_GRID_STRIDE(i, n) { x[i] *= coef; }
}

}  // namespace

void sum_squares(const float* x, size_t n, float* acc, cudaStream_t stream) {
  if (n == 0) return;
  sum_squares_kernel<<<1, kBlock, 0, stream>>>(x, n, acc);
  check_launch("sum_squares");
}

void clip_by_norm(float* x, size_t n, const float* acc, float max_norm, cudaStream_t stream) {
  if (n == 0) return;
  clip_by_norm_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, n, acc, max_norm);
  check_launch("clip_by_norm");
}

}  // namespace hpctrain::kernels
