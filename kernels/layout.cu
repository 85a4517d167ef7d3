// Batched transposes for the channels-last (NHWC) layout: [n][a][b] -> [n][b][a] through a
// 32x32 shared-memory tile, so that reads and writes are both coalesced. The element types
// of source and destination may differ (filters: float32 values into the 16-bit compute
// copy, and 16-bit gradients back into float32); values pass through float, rounded to
// nearest even where stored in 16 bits.
#include "kernels/act.cuh"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain::kernels {
namespace {

constexpr int kTile = 32, kRows = 8;

template <typename In, typename Out>
__global__ void transpose_kernel(const In* src, Out* dst, int n, int a, int b) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the column reads
  const size_t plane = static_cast<size_t>(a) * b;
  const int b0 = blockIdx.x * kTile, a0 = blockIdx.y * kTile;
  for (size_t z = blockIdx.z; z < static_cast<size_t>(n); z += gridDim.z) {
    const In* s = src + z * plane;
    Out* d = dst + z * plane;
    for (int j = threadIdx.y; j < kTile; j += kRows) {
      const int ai = a0 + j, bi = b0 + threadIdx.x;
      if (ai < a && bi < b) tile[j][threadIdx.x] = as_float(s[static_cast<size_t>(ai) * b + bi]);
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kRows) {
      const int bi = b0 + j, ai = a0 + threadIdx.x;
      if (ai < a && bi < b) d[static_cast<size_t>(bi) * a + ai] = to_act<Out>(tile[threadIdx.x][j]);
    }
    __syncthreads();  // the tile is reused for the next z
  }
}

// [n][a][b] -> [n][b][a] for a few rows a (an image's channels, 1 or 3, into channels-last):
// the tile kernel would leave most of its 32 rows idle (0.55 ms for ResNet-34's 128x3x224x224
// input in bfloat16 on an H200). A thread takes one column: its a reads are each coalesced
// across the warp, its a writes adjacent, and the warp's writes one contiguous span.
template <typename In, typename Out>
__global__ void transpose_narrow_kernel(const In* src, Out* dst, size_t n, int a, int b) {
  const size_t plane = static_cast<size_t>(a) * b;
  HT_GRID_STRIDE(i, n * b) {
    const size_t z = i / b, bi = i % b;
    const In* s = src + z * plane + bi;
    Out* d = dst + z * plane + bi * a;
    for (int ai = 0; ai < a; ++ai) d[ai] = to_act<Out>(as_float(s[static_cast<size_t>(ai) * b]));
  }
}

constexpr int kNarrowRows = 4;  // a up to this: transpose_narrow_kernel

template <typename In, typename Out>
void launch_transpose(const In* src, Out* dst, int n, int a, int b, cudaStream_t stream) {
  if (a <= kNarrowRows) {
    const size_t columns = static_cast<size_t>(n) * b;
    transpose_narrow_kernel<<<grid_for(columns), kBlock, 0, stream>>>(src, dst,
                                                                      static_cast<size_t>(n), a, b);
    return;
  }
  const dim3 grid((b + kTile - 1) / kTile, (a + kTile - 1) / kTile,
                  static_cast<unsigned>(std::min(n, 65535)));
  transpose_kernel<<<grid, dim3(kTile, kRows), 0, stream>>>(src, dst, n, a, b);
}

}  // namespace

void transpose(DType t, const void* src, void* dst, int n, int a, int b, cudaStream_t stream) {
  if (n == 0 || a == 0 || b == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    launch_transpose(static_cast<const T*>(src), static_cast<T*>(dst), n, a, b, stream);
  });
  check_launch("transpose");
}

void convert_transposed(DType t, const float* src, void* dst, int n, int a, int b,
                        cudaStream_t stream) {
  if (n == 0 || a == 0 || b == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    launch_transpose(src, static_cast<T*>(dst), n, a, b, stream);
  });
  check_launch("convert_transposed");
}

void convert_to_float_transposed(DType t, const void* src, float* dst, int n, int a, int b,
                                 cudaStream_t stream) {
  if (n == 0 || a == 0 || b == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    launch_transpose(static_cast<const T*>(src), dst, n, a, b, stream);
  });
  check_launch("convert_to_float_transposed");
}

}  // namespace hpctrain::kernels
