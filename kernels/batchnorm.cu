// Channels-last batch normalisation of data [m, c] (channels adjacent in memory), alone or
// fused with what follows it in a ResNet: y = relu(bn(x) + z). cuDNN's legacy batch
// normalisation took 15.7 ms forward and 24.2 ms backward on ResNet-34's stem in this
// layout (bfloat16, 128x64x112x112 on an H100), against about 1.5 and 2.3 ms in NCHW;
// these kernels move each tensor a few times at memory speed instead.
//
// Work layout: a thread owns V adjacent channels (one 16-byte access: 8 16-bit values or
// 4 floats; V = 1 when c or an address does not allow it) and walks rows; a block is bx
// column threads x lanes rows (256 threads) over bx * V channels; blocks along y take
// chunks of rows (sums) or stride over rows (element-wise passes).
//
// Forward statistics take one pass: each thread keeps Welford's running mean and sum of
// squared deviations (m2) per channel in float over its rows; the block merges its lanes
// into one partial per chunk, and one kernel merges the chunks, in double. A merge of parts
// k takes their mean weighted by their rows, then m2 = sum of (m2_k + n_k (mean_k - mean)^2):
// deviations from the merged mean, so nothing cancels, and no division per part. Backward
// sums g and g * (x - mean) the same way. Everything adds in a fixed order: results repeat
// bit for bit. Each fused step rounds as the separate operations
// (batchnorm_forward_*, add, relu_*) round theirs, so the fused and separate calls agree
// bit for bit on the same backend.
#include <algorithm>

#include "kernels/act.cuh"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"
#include "kernels/pack.cuh"

namespace hpctrain::kernels {
namespace {

constexpr int kThreads = 256;        // per block of the row kernels
constexpr int kMaxColumns = 32;      // column threads per block
constexpr int kMaxValues = 8;        // values per access at most (16-bit)
constexpr int kTargetBlocks = 2048;  // per pass: an H100 holds 132 SMs x 8 such blocks
constexpr int kMinRowsPerLane = 4;   // in a chunk of the sums
// The per-channel merge kernels: a block of 8 channels x 128 lanes; a lane keeps kMergeLoads
// running sums over its chunks, so that as many loads are in flight. A merge of the 2,048
// chunks of a 64-channel layer was latency-bound: 41 us a call on an H200 with blocks of 32
// channels x 16 lanes and one sum, 28 us (two passes) with 32 x 32 lanes and 8 sums, in the
// 2 blocks that 64 channels made; 8 channels a block spread it over 8.
constexpr int kMergeChannels = 8, kMergeLanes = 128, kMergeLoads = 8;

// v as a separate operation would store it: rounded to T, widened again.
template <typename T>
__device__ __forceinline__ float rounded(float v) {
  return as_float(to_act<T>(v));
}

// Rows that lane `lane` of `lanes` visits among `rows` (lane, lane + lanes, ...).
__device__ __forceinline__ int lane_rows(int rows, int lane, int lanes) {
  return rows > lane ? (rows - lane + lanes - 1) / lanes : 0;
}

// Thread t's two partials of each of its V channels into shared memory, at t * V.
template <int V>
__device__ __forceinline__ void stash(float* s1, float* s2, int t, const float (&a)[V],
                                      const float (&b)[V]) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    s1[t * V + j] = a[j];
    s2[t * V + j] = b[j];
  }
}

// Per chunk of rows and channel: the rows' mean and sum of squared deviations.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    welford_kernel(const T* x, int m, int c, int chunk_rows, float* part_mean, float* part_m2) {
  __shared__ float s_mean[kThreads * kMaxValues], s_m2[kThreads * kMaxValues];
  const int bx = blockDim.x, lanes = blockDim.y;
  const int col = blockIdx.x * bx + threadIdx.x;  // channels col * V, ...
  const int r0 = blockIdx.y * chunk_rows, r1 = min(m, r0 + chunk_rows);
  float mean[V], m2[V];
#pragma unroll
  for (int j = 0; j < V; ++j) mean[j] = m2[j] = 0.0f;
  if (col * V < c) {
    int count = 0;
    for (int r = r0 + threadIdx.y; r < r1; r += lanes) {
      float v[V];
      load<T, V>(x + static_cast<size_t>(r) * c + col * V, v);
      const float inv = 1.0f / static_cast<float>(++count);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float d = v[j] - mean[j];
        mean[j] += d * inv;
        m2[j] += d * (v[j] - mean[j]);
      }
    }
  }
  const int t = threadIdx.y * bx + threadIdx.x;
  stash(s_mean, s_m2, t, mean, m2);
  __syncthreads();
  // Thread t merges the lanes of the block's channel t, in lane order.
  const int ch = blockIdx.x * bx * V + t;
  if (t >= bx * V || ch >= c) return;
  const int tcol = t / V, j = t % V, rows = r1 - r0;
  float sum = 0.0f;
  for (int l = 0; l < lanes; ++l) {
    sum += static_cast<float>(lane_rows(rows, l, lanes)) * s_mean[(l * bx + tcol) * V + j];
  }
  const float chunk_mean = sum / static_cast<float>(rows);
  float chunk_m2 = 0.0f;
  for (int l = 0; l < lanes; ++l) {
    const int s = (l * bx + tcol) * V + j;
    const float d = s_mean[s] - chunk_mean;
    chunk_m2 += s_m2[s] + static_cast<float>(lane_rows(rows, l, lanes)) * d * d;
  }
  part_mean[static_cast<size_t>(blockIdx.y) * c + ch] = chunk_mean;
  part_m2[static_cast<size_t>(blockIdx.y) * c + ch] = chunk_m2;
}

// The sum in double of f(k) over the chunks k = lane, lane + kMergeLanes, ... (k < chunks),
// in kMergeLoads interleaved running sums added in order at the end: a fixed order for given
// chunks, so results repeat bit for bit.
template <typename F>
__device__ __forceinline__ double lane_sum(int chunks, int lane, F f) {
  double acc[kMergeLoads];
#pragma unroll
  for (int u = 0; u < kMergeLoads; ++u) acc[u] = 0.0;
  for (int k = lane; k < chunks; k += kMergeLoads * kMergeLanes) {
#pragma unroll
    for (int u = 0; u < kMergeLoads; ++u) {
      const int kk = k + u * kMergeLanes;
      if (kk < chunks) acc[u] += f(kk);
    }
  }
  double total = 0.0;
#pragma unroll
  for (int u = 0; u < kMergeLoads; ++u) total += acc[u];
  return total;
}

// Adds the lanes' parts s[l][channel] of each channel in a fixed tree (lane l and l + half,
// halving half), by the whole block: s[0][channel] holds the total after it. Fixed, so
// results repeat bit for bit.
__device__ __forceinline__ void add_lanes(double (*s)[kMergeChannels]) {
  for (int half = kMergeLanes / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.y < half) s[threadIdx.y][threadIdx.x] += s[threadIdx.y + half][threadIdx.x];
  }
  __syncthreads();
}

// Merges each channel's chunk partials in double (lane l of the block takes chunks l,
// l + kMergeLanes, ... (lane_sum); the lanes are then added by add_lanes), and writes the saved
// mean and 1/sqrt(var + eps), the running statistics (unbiased variance), as CpuBackend, and the
// apply kernel's coefficients scale = gamma * invstd and shift = beta - mean * scale.
__global__ void __launch_bounds__(kMergeChannels* kMergeLanes)
    merge_statistics_kernel(const float* part_mean, const float* part_m2, int chunks,
                            int chunk_rows, int m, int c, const float* gamma, const float* beta,
                            float eps, float momentum, float* running_mean, float* running_var,
                            float* save_mean, float* save_invstd, float* scale, float* shift) {
  __shared__ double s_part[kMergeLanes][kMergeChannels];
  const int ch = blockIdx.x * kMergeChannels + threadIdx.x;
  const int ty = threadIdx.y, tx = threadIdx.x;
  // The sum of the lanes' parts, for every lane alike.
  auto lanes_total = [&](double part) {
    s_part[ty][tx] = part;
    add_lanes(s_part);
    const double total = s_part[0][tx];
    __syncthreads();  // s_part is free again
    return total;
  };
  auto rows_of = [&](int k) { return static_cast<double>(min(m - k * chunk_rows, chunk_rows)); };
  const int lane_chunks = ch < c ? chunks : 0;
  const double sum = lane_sum(lane_chunks, ty, [&](int k) {
    return rows_of(k) * part_mean[static_cast<size_t>(k) * c + ch];
  });
  const double mean = lanes_total(sum) / m;
  const double dev = lane_sum(lane_chunks, ty, [&](int k) {
    const size_t i = static_cast<size_t>(k) * c + ch;
    const double d = part_mean[i] - mean;
    return part_m2[i] + rows_of(k) * d * d;
  });
  const double m2 = lanes_total(dev);
  if (ty != 0 || ch >= c) return;
  const double var = m2 / m;
  const float mu = static_cast<float>(mean);
  const float invstd = static_cast<float>(1.0 / sqrt(var + eps));
  save_mean[ch] = mu;
  save_invstd[ch] = invstd;
  const double unbiased = m > 1 ? m2 / (m - 1) : var;
  running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mu;
  running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * static_cast<float>(unbiased);
  const float s = gamma[ch] * invstd;
  scale[ch] = s;
  shift[ch] = beta[ch] - mu * s;
}

// Evaluation: scale and shift from the running statistics.
__global__ void inference_coefficients_kernel(const float* gamma, const float* beta,
                                              const float* running_mean, const float* running_var,
                                              float eps, int c, float* scale, float* shift) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const float s = gamma[ch] / sqrtf(running_var[ch] + eps);
  scale[ch] = s;
  shift[ch] = beta[ch] - running_mean[ch] * s;
}

// y = x * scale + shift, then (kAdd) + z, then (kRelu) relu, each rounded as stored.
template <typename T, int V, bool kAdd, bool kRelu>
__global__ void __launch_bounds__(kThreads) apply_kernel(const T* x, const T* z, const float* scale,
                                                         const float* shift, T* y, int m, int c) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col * V >= c) return;
  float a[V], b[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    a[j] = scale[col * V + j];
    b[j] = shift[col * V + j];
  }
  for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < m; r += gridDim.y * blockDim.y) {
    const size_t i = static_cast<size_t>(r) * c + col * V;
    float v[V];
    load<T, V>(x + i, v);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = v[j] * a[j] + b[j];
    if constexpr (kAdd) {
      float w[V];
      load<T, V>(z + i, w);
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = rounded<T>(v[j]) + w[j];
    }
    if constexpr (kRelu) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float u = rounded<T>(v[j]);
        v[j] = u > 0.0f ? u : 0.0f;
      }
    }
    store<T, V>(y + i, v);
  }
}

// Per chunk of rows and channel: the sums of g and g * (x - mean), with g = dy, or (kMask)
// g = dy where y > 0, else 0, which it also stores to g_out (relu_backward's result).
template <typename T, int V, bool kMask>
__global__ void __launch_bounds__(kThreads)
    backward_sums_kernel(const T* x, const T* y, const T* dy, T* g_out, const float* mean, int m,
                         int c, int chunk_rows, float* part_g, float* part_gx) {
  __shared__ float s_g[kThreads * kMaxValues], s_gx[kThreads * kMaxValues];
  const int bx = blockDim.x, lanes = blockDim.y;
  const int col = blockIdx.x * bx + threadIdx.x;
  const int r0 = blockIdx.y * chunk_rows, r1 = min(m, r0 + chunk_rows);
  float sum_g[V], sum_gx[V];
#pragma unroll
  for (int j = 0; j < V; ++j) sum_g[j] = sum_gx[j] = 0.0f;
  if (col * V < c) {
    float mu[V];
#pragma unroll
    for (int j = 0; j < V; ++j) mu[j] = mean[col * V + j];
    for (int r = r0 + threadIdx.y; r < r1; r += lanes) {
      const size_t i = static_cast<size_t>(r) * c + col * V;
      float xv[V], g[V];
      load<T, V>(x + i, xv);
      load<T, V>(dy + i, g);
      if constexpr (kMask) {
        float yv[V];
        load<T, V>(y + i, yv);
#pragma unroll
        for (int j = 0; j < V; ++j) g[j] = yv[j] > 0.0f ? g[j] : 0.0f;
        store<T, V>(g_out + i, g);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) {
        sum_g[j] += g[j];
        sum_gx[j] += g[j] * (xv[j] - mu[j]);
      }
    }
  }
  const int t = threadIdx.y * bx + threadIdx.x;
  stash(s_g, s_gx, t, sum_g, sum_gx);
  __syncthreads();
  const int ch = blockIdx.x * bx * V + t;
  if (t >= bx * V || ch >= c) return;
  const int tcol = t / V, j = t % V;
  float a = 0.0f, b = 0.0f;
  for (int l = 0; l < lanes; ++l) {
    const int s = (l * bx + tcol) * V + j;
    a += s_g[s];
    b += s_gx[s];
  }
  part_g[static_cast<size_t>(blockIdx.y) * c + ch] = a;
  part_gx[static_cast<size_t>(blockIdx.y) * c + ch] = b;
}

// Adds each channel's chunk sums in double in a fixed order (as merge_statistics_kernel),
// then dbeta, dgamma and the coefficients of dx: coef_a = mean(g),
// coef_b = mean(g * (x - mean)) * invstd^2.
__global__ void __launch_bounds__(kMergeChannels* kMergeLanes)
    merge_sums_kernel(const float* part_g, const float* part_gx, int chunks, int m, int c,
                      const float* invstd, float* dgamma, float* dbeta, float* coef_a,
                      float* coef_b) {
  __shared__ double s_g[kMergeLanes][kMergeChannels], s_gx[kMergeLanes][kMergeChannels];
  const int ch = blockIdx.x * kMergeChannels + threadIdx.x;
  const int lane_chunks = ch < c ? chunks : 0;
  s_g[threadIdx.y][threadIdx.x] = lane_sum(
      lane_chunks, threadIdx.y, [&](int k) { return part_g[static_cast<size_t>(k) * c + ch]; });
  s_gx[threadIdx.y][threadIdx.x] = lane_sum(
      lane_chunks, threadIdx.y, [&](int k) { return part_gx[static_cast<size_t>(k) * c + ch]; });
  add_lanes(s_g);
  add_lanes(s_gx);
  if (threadIdx.y != 0 || ch >= c) return;
  const double g = s_g[0][threadIdx.x], gx = s_gx[0][threadIdx.x];
  dbeta[ch] = static_cast<float>(g);
  dgamma[ch] = static_cast<float>(gx * invstd[ch]);
  coef_a[ch] = static_cast<float>(g / m);
  coef_b[ch] = static_cast<float>(gx / m) * invstd[ch] * invstd[ch];
}

// dx = gamma * invstd * (g - coef_a - (x - mean) * coef_b).
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    backward_dx_kernel(const T* x, const T* g, const float* gamma, const float* mean,
                       const float* invstd, const float* coef_a, const float* coef_b, T* dx, int m,
                       int c) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col * V >= c) return;
  float k[V], mu[V], ca[V], cb[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int ch = col * V + j;
    k[j] = gamma[ch] * invstd[ch];
    mu[j] = mean[ch];
    ca[j] = coef_a[ch];
    cb[j] = coef_b[ch];
  }
  for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < m; r += gridDim.y * blockDim.y) {
    const size_t i = static_cast<size_t>(r) * c + col * V;
    float xv[V], gv[V];
    load<T, V>(x + i, xv);
    load<T, V>(g + i, gv);
#pragma unroll
    for (int j = 0; j < V; ++j) gv[j] = k[j] * (gv[j] - ca[j] - (xv[j] - mu[j]) * cb[j]);
    store<T, V>(dx + i, gv);
  }
}

// The grids of one call for m rows of c channels, and its scratch: the two coefficient
// arrays (c floats each), then the two partial arrays (chunks x c floats each).
struct Plan {
  int values;  // per access: 16 / sizeof(T), or 1
  dim3 block;  // column threads x row lanes
  unsigned column_blocks, row_blocks;
  int chunks, chunk_rows;
  float *coef_a, *coef_b, *part1, *part2;

  dim3 sums_grid() const { return dim3(column_blocks, static_cast<unsigned>(chunks)); }
  dim3 rows_grid() const { return dim3(column_blocks, row_blocks); }
  dim3 merge_grid(int c) const { return dim3((c + kMergeChannels - 1) / kMergeChannels); }
};

Plan plan(int m, int c, int values, float* scratch, size_t scratch_floats) {
  Plan p;
  p.values = values;
  const int accesses = c / p.values;  // per row
  int bx = 1;
  while (bx < accesses && bx < kMaxColumns) bx *= 2;
  const int lanes = kThreads / bx;
  p.block = dim3(bx, lanes);
  p.column_blocks = static_cast<unsigned>((accesses + bx - 1) / bx);
  const int per_column = std::max(1, kTargetBlocks / static_cast<int>(p.column_blocks));
  const size_t fit = (scratch_floats - 2 * static_cast<size_t>(c)) / (2 * static_cast<size_t>(c));
  p.chunks = std::max(1, std::min({per_column, m / (lanes * kMinRowsPerLane),
                                   static_cast<int>(std::min<size_t>(fit, 1 << 20))}));
  p.chunk_rows = (m + p.chunks - 1) / p.chunks;
  p.chunks = (m + p.chunk_rows - 1) / p.chunk_rows;  // no empty chunk
  p.row_blocks = static_cast<unsigned>(std::clamp((m + lanes - 1) / lanes, 1, 2 * per_column));
  p.coef_a = scratch;
  p.coef_b = scratch + c;
  p.part1 = scratch + 2 * static_cast<size_t>(c);
  p.part2 = p.part1 + static_cast<size_t>(p.chunks) * c;
  return p;
}

}  // namespace

size_t batchnorm_nhwc_min_scratch(int c) { return 4 * static_cast<size_t>(c); }

void batchnorm_nhwc_forward(DType t, bool training, const void* x, const void* z, bool relu,
                            const float* gamma, const float* beta, void* y, int m, int c, float eps,
                            float momentum, float* running_mean, float* running_var,
                            float* save_mean, float* save_invstd, float* scratch,
                            size_t scratch_floats, cudaStream_t stream) {
  if (m == 0 || c == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    const Plan p = plan(m, c, pack_values<T>(c, {x, z, y}), scratch, scratch_floats);
    const T* xt = static_cast<const T*>(x);
    const T* zt = static_cast<const T*>(z);
    T* yt = static_cast<T*>(y);
    if (training) {
      with_pack<T>(p.values, [&](auto values) {
        welford_kernel<T, decltype(values)::value>
            <<<p.sums_grid(), p.block, 0, stream>>>(xt, m, c, p.chunk_rows, p.part1, p.part2);
      });
      merge_statistics_kernel<<<p.merge_grid(c), dim3(kMergeChannels, kMergeLanes), 0, stream>>>(
          p.part1, p.part2, p.chunks, p.chunk_rows, m, c, gamma, beta, eps, momentum, running_mean,
          running_var, save_mean, save_invstd, p.coef_a, p.coef_b);
    } else {
      inference_coefficients_kernel<<<(c + kBlock - 1) / kBlock, kBlock, 0, stream>>>(
          gamma, beta, running_mean, running_var, eps, c, p.coef_a, p.coef_b);
    }
    with_pack<T>(p.values, [&](auto values) {
      constexpr int V = decltype(values)::value;
      const dim3 grid = p.rows_grid();
      if (z != nullptr && relu) {
        apply_kernel<T, V, true, true>
            <<<grid, p.block, 0, stream>>>(xt, zt, p.coef_a, p.coef_b, yt, m, c);
      } else if (z != nullptr) {
        apply_kernel<T, V, true, false>
            <<<grid, p.block, 0, stream>>>(xt, zt, p.coef_a, p.coef_b, yt, m, c);
      } else if (relu) {
        apply_kernel<T, V, false, true>
            <<<grid, p.block, 0, stream>>>(xt, zt, p.coef_a, p.coef_b, yt, m, c);
      } else {
        apply_kernel<T, V, false, false>
            <<<grid, p.block, 0, stream>>>(xt, zt, p.coef_a, p.coef_b, yt, m, c);
      }
    });
  });
  check_launch("batchnorm_nhwc_forward");
}

void batchnorm_nhwc_backward(DType t, const void* x, const void* y, const void* dy, void* g,
                             const float* gamma, void* dx, float* dgamma, float* dbeta, int m,
                             int c, const float* save_mean, const float* save_invstd,
                             float* scratch, size_t scratch_floats, cudaStream_t stream) {
  if (m == 0 || c == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    const Plan p = plan(m, c, pack_values<T>(c, {x, y, dy, g, dx}), scratch, scratch_floats);
    const T* xt = static_cast<const T*>(x);
    const T* yt = static_cast<const T*>(y);
    const T* dyt = static_cast<const T*>(dy);
    T* gt = static_cast<T*>(g);
    with_pack<T>(p.values, [&](auto values) {
      constexpr int V = decltype(values)::value;
      if (y != nullptr) {
        backward_sums_kernel<T, V, true><<<p.sums_grid(), p.block, 0, stream>>>(
            xt, yt, dyt, gt, save_mean, m, c, p.chunk_rows, p.part1, p.part2);
      } else {
        backward_sums_kernel<T, V, false><<<p.sums_grid(), p.block, 0, stream>>>(
            xt, yt, dyt, gt, save_mean, m, c, p.chunk_rows, p.part1, p.part2);
      }
    });
    merge_sums_kernel<<<p.merge_grid(c), dim3(kMergeChannels, kMergeLanes), 0, stream>>>(
        p.part1, p.part2, p.chunks, m, c, save_invstd, dgamma, dbeta, p.coef_a, p.coef_b);
    if (dx != nullptr) {
      with_pack<T>(p.values, [&](auto values) {
        backward_dx_kernel<T, decltype(values)::value><<<p.rows_grid(), p.block, 0, stream>>>(
            xt, y != nullptr ? gt : dyt, gamma, save_mean, save_invstd, p.coef_a, p.coef_b,
            static_cast<T*>(dx), m, c);
      });
    }
  });
  check_launch("batchnorm_nhwc_backward");
}

}  // namespace hpctrain::kernels
