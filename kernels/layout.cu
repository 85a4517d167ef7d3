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

// [n][a][b] -> [n][b][a] with few rows a (an image's 1 or 3 channels into channels-last; a
// 3x3 filter's 9 positions, KRSC -> KCRS): the tile kernel would leave most of its 32 rows
// idle (0.55 ms for ResNet-34's 128x3x224x224 input in bfloat16 on an H200). A thread takes
// one column: its a reads are each coalesced across the warp, and the warp's writes are one
// contiguous span.
template <typename In, typename Out>
__global__ void transpose_few_rows_kernel(const In* src, Out* dst, size_t n, int a, int b) {
  const size_t plane = static_cast<size_t>(a) * b;
  HT_GRID_STRIDE(i, n * b) {
    const size_t z = i / b, bi = i % b;
    const In* s = src + z * plane + bi;
    Out* d = dst + z * plane + bi * a;
    for (int ai = 0; ai < a; ++ai) d[ai] = to_act<Out>(as_float(s[static_cast<size_t>(ai) * b]));
  }
}

// The same with few columns b (filters KCRS -> KRSC, b = 9 for 3x3): a thread takes one row,
// its b reads adjacent, and each of its b writes coalesced across the warp.
template <typename In, typename Out>
__global__ void transpose_few_columns_kernel(const In* src, Out* dst, size_t n, int a, int b) {
  const size_t plane = static_cast<size_t>(a) * b;
  HT_GRID_STRIDE(i, n * a) {
    const size_t z = i / a, ai = i % a;
    const In* s = src + z * plane + ai * b;
    Out* d = dst + z * plane + ai;
    for (int bi = 0; bi < b; ++bi) d[static_cast<size_t>(bi) * a] = to_act<Out>(as_float(s[bi]));
  }
}

constexpr int kFew = 16;  // rows or columns up to this: the kernels above

template <typename In, typename Out>
void launch_transpose(const In* src, Out* dst, int n, int a, int b, cudaStream_t stream) {
  const size_t planes = static_cast<size_t>(n);
  if (a <= kFew && a <= b) {
    transpose_few_rows_kernel<<<grid_for(planes * b), kBlock, 0, stream>>>(src, dst, planes, a, b);
    return;
  }
  if (b <= kFew) {
    transpose_few_columns_kernel<<<grid_for(planes * a), kBlock, 0, stream>>>(src, dst, planes, a,
                                                                              b);
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
