// Channels-last batch normalisation: data [m, c], channels adjacent in memory. cuDNN's
// legacy batch normalisation took 15.7 ms forward and 24.2 ms backward on ResNet-34's stem
// in this layout (bfloat16, 128x64x112x112 on an H100), against about 1.5 and 2.3 ms in
// NCHW; these kernels move the data a few times at memory speed instead.
//
// Per-channel sums: blocks of 32 channels x 8 row lanes (a warp reads 32 adjacent
// channels of one row) over a chunk of rows; each thread sums in float, the block adds its
// 8 lanes in order and writes one partial per channel and chunk; one thread per channel
// then adds the chunks in order in double. Nothing depends on timing: results repeat bit
// for bit.
#include <algorithm>

#include "kernels/act.cuh"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain::kernels {
namespace {

constexpr int kChannels = 32, kLanes = 8;
constexpr int kMaxChunks = 128;
constexpr int kRowsPerChunk = 128;  // at least, before kMaxChunks caps the count

enum class Sum { kX, kCenteredSquare, kDyAndDyCentered };

// part1/part2: [chunks][c]. kX: x; kCenteredSquare: (x - mean)^2; kDyAndDyCentered: dy
// into part1, dy * (x - mean) into part2.
template <Sum kSum, typename T>
__global__ void partials_kernel(const T* x, const T* dy, const float* mean, int m, int c,
                                int chunk_rows, float* part1, float* part2) {
  __shared__ float s1[kLanes][kChannels], s2[kLanes][kChannels];
  const int ch = blockIdx.x * kChannels + threadIdx.x;
  const int r0 = blockIdx.y * chunk_rows, r1 = min(m, r0 + chunk_rows);
  float a = 0.0f, b = 0.0f;
  if (ch < c) {
    const float mu = kSum == Sum::kX ? 0.0f : mean[ch];
    for (int r = r0 + threadIdx.y; r < r1; r += kLanes) {
      const size_t i = static_cast<size_t>(r) * c + ch;
      const float v = as_float(x[i]);
      if constexpr (kSum == Sum::kX) {
        a += v;
      } else if constexpr (kSum == Sum::kCenteredSquare) {
        a += (v - mu) * (v - mu);
      } else {
        const float d = as_float(dy[i]);
        a += d;
        b += d * (v - mu);
      }
    }
  }
  s1[threadIdx.y][threadIdx.x] = a;
  s2[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    for (int l = 1; l < kLanes; ++l) {
      a += s1[l][threadIdx.x];
      b += s2[l][threadIdx.x];
    }
    part1[static_cast<size_t>(blockIdx.y) * c + ch] = a;
    if constexpr (kSum == Sum::kDyAndDyCentered)
      part2[static_cast<size_t>(blockIdx.y) * c + ch] = b;
  }
}

__device__ double sum_chunks(const float* part, int chunks, int c, int ch) {
  double s = 0.0;
  for (int k = 0; k < chunks; ++k) s += part[static_cast<size_t>(k) * c + ch];
  return s;
}

__global__ void mean_kernel(const float* part, int chunks, int m, int c, float* mean) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch < c) mean[ch] = static_cast<float>(sum_chunks(part, chunks, c, ch) / m);
}

// Variance from the centred squares; the saved 1/std and the running statistics (unbiased
// variance), as CpuBackend.
__global__ void variance_kernel(const float* part, int chunks, int m, int c, float eps,
                                float momentum, const float* mean, float* running_mean,
                                float* running_var, float* save_invstd) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double var = sum_chunks(part, chunks, c, ch) / m;
  save_invstd[ch] = static_cast<float>(1.0 / sqrt(var + eps));
  const double unbiased = m > 1 ? var * m / (m - 1) : var;
  running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mean[ch];
  running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * static_cast<float>(unbiased);
}

// y = x * scale + shift with scale = gamma * invstd, shift = beta - mean * scale.
template <typename T>
__global__ void normalize_kernel(const T* x, const float* gamma, const float* beta,
                                 const float* mean, const float* invstd, T* y, size_t total,
                                 int c) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int ch = static_cast<int>(i % c);
    const float scale = gamma[ch] * invstd[ch], shift = beta[ch] - mean[ch] * scale;
    y[i] = to_act<T>(as_float(x[i]) * scale + shift);
  }
}

template <typename T>
__global__ void inference_kernel(const T* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float eps,
                                 T* y, size_t total, int c) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int ch = static_cast<int>(i % c);
    const float scale = gamma[ch] / sqrtf(running_var[ch] + eps);
    const float shift = beta[ch] - running_mean[ch] * scale;
    y[i] = to_act<T>(as_float(x[i]) * scale + shift);
  }
}

// dbeta, dgamma, and the coefficients of dx: coef[ch] = mean(dy), coef[c + ch] =
// mean(dy * (x - mean)) * invstd^2.
__global__ void backward_params_kernel(const float* part1, const float* part2, int chunks, int m,
                                       int c, const float* invstd, float* dgamma, float* dbeta,
                                       float* coef) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double sum_dy = sum_chunks(part1, chunks, c, ch);
  const double sum_dy_xc = sum_chunks(part2, chunks, c, ch);
  dbeta[ch] = static_cast<float>(sum_dy);
  dgamma[ch] = static_cast<float>(sum_dy_xc * invstd[ch]);
  coef[ch] = static_cast<float>(sum_dy / m);
  coef[c + ch] = static_cast<float>(sum_dy_xc / m) * invstd[ch] * invstd[ch];
}

// dx = gamma * invstd * (dy - mean(dy) - (x - mean) * coef2).
template <typename T>
__global__ void backward_dx_kernel(const T* x, const T* dy, const float* gamma, const float* mean,
                                   const float* invstd, const float* coef, T* dx, size_t total,
                                   int c) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int ch = static_cast<int>(i % c);
    const float k = gamma[ch] * invstd[ch];
    dx[i] =
        to_act<T>(k * (as_float(dy[i]) - coef[ch] - (as_float(x[i]) - mean[ch]) * coef[c + ch]));
  }
}

// Row chunks for m rows of c channels within the scratch: two partial arrays of
// chunks x c floats after 2c floats of coefficients.
int chunks_for(int m, int c, size_t scratch_floats) {
  const size_t fit = (scratch_floats - 2 * static_cast<size_t>(c)) / (2 * static_cast<size_t>(c));
  const int wanted = (m + kRowsPerChunk - 1) / kRowsPerChunk;
  return std::max(1, static_cast<int>(std::min<size_t>(
                         {static_cast<size_t>(wanted), static_cast<size_t>(kMaxChunks), fit})));
}

struct Plan {
  int chunks, chunk_rows;
  dim3 grid, block;
  unsigned channel_blocks;  // for the one-thread-per-channel kernels (kBlock threads)
  float *coef, *part1, *part2;
};

Plan plan(int m, int c, float* scratch, size_t scratch_floats) {
  Plan p;
  p.chunks = chunks_for(m, c, scratch_floats);
  p.chunk_rows = (m + p.chunks - 1) / p.chunks;
  p.chunks = (m + p.chunk_rows - 1) / p.chunk_rows;  // no empty chunk
  p.grid = dim3((c + kChannels - 1) / kChannels, p.chunks);
  p.block = dim3(kChannels, kLanes);
  p.channel_blocks = static_cast<unsigned>((c + kBlock - 1) / kBlock);
  p.coef = scratch;
  p.part1 = scratch + 2 * static_cast<size_t>(c);
  p.part2 = p.part1 + static_cast<size_t>(p.chunks) * c;
  return p;
}

}  // namespace

size_t batchnorm_nhwc_min_scratch(int c) { return 4 * static_cast<size_t>(c); }

void batchnorm_nhwc_forward_training(DType t, const void* x, const float* gamma, const float* beta,
                                     void* y, int m, int c, float eps, float momentum,
                                     float* running_mean, float* running_var, float* save_mean,
                                     float* save_invstd, float* scratch, size_t scratch_floats,
                                     cudaStream_t stream) {
  if (m == 0 || c == 0) return;
  const Plan p = plan(m, c, scratch, scratch_floats);
  const size_t total = static_cast<size_t>(m) * c;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    const T* xt = static_cast<const T*>(x);
    partials_kernel<Sum::kX>
        <<<p.grid, p.block, 0, stream>>>(xt, xt, nullptr, m, c, p.chunk_rows, p.part1, nullptr);
    mean_kernel<<<p.channel_blocks, kBlock, 0, stream>>>(p.part1, p.chunks, m, c, save_mean);
    partials_kernel<Sum::kCenteredSquare>
        <<<p.grid, p.block, 0, stream>>>(xt, xt, save_mean, m, c, p.chunk_rows, p.part1, nullptr);
    variance_kernel<<<p.channel_blocks, kBlock, 0, stream>>>(
        p.part1, p.chunks, m, c, eps, momentum, save_mean, running_mean, running_var, save_invstd);
    normalize_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        xt, gamma, beta, save_mean, save_invstd, static_cast<T*>(y), total, c);
  });
  check_launch("batchnorm_nhwc_forward_training");
}

void batchnorm_nhwc_forward_inference(DType t, const void* x, const float* gamma, const float* beta,
                                      void* y, int m, int c, float eps, const float* running_mean,
                                      const float* running_var, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(m) * c;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    inference_kernel<<<grid_for(total), kBlock, 0, stream>>>(static_cast<const T*>(x), gamma, beta,
                                                             running_mean, running_var, eps,
                                                             static_cast<T*>(y), total, c);
  });
  check_launch("batchnorm_nhwc_forward_inference");
}

void batchnorm_nhwc_backward(DType t, const void* x, const void* dy, const float* gamma, void* dx,
                             float* dgamma, float* dbeta, int m, int c, const float* save_mean,
                             const float* save_invstd, float* scratch, size_t scratch_floats,
                             cudaStream_t stream) {
  if (m == 0 || c == 0) return;
  const Plan p = plan(m, c, scratch, scratch_floats);
  const size_t total = static_cast<size_t>(m) * c;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    partials_kernel<Sum::kDyAndDyCentered>
        <<<p.grid, p.block, 0, stream>>>(xt, dyt, save_mean, m, c, p.chunk_rows, p.part1, p.part2);
    backward_params_kernel<<<p.channel_blocks, kBlock, 0, stream>>>(
        p.part1, p.part2, p.chunks, m, c, save_invstd, dgamma, dbeta, p.coef);
    if (dx != nullptr) {
      backward_dx_kernel<<<grid_for(total), kBlock, 0, stream>>>(
          xt, dyt, gamma, save_mean, save_invstd, p.coef, static_cast<T*>(dx), total, c);
    }
  });
  check_launch("batchnorm_nhwc_backward");
}

}  // namespace hpctrain::kernels
