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

template <typename In, typename Out>
void launch_transpose(const In* src, Out* dst, int n, int a, int b, cudaStream_t stream) {
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
