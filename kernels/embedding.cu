// Embedding kernels: the table lookup and its gradient (CpuBackend's cpu_embedding.cpp
// computes the same). Token ids arrive as activations holding exact integers; an id that
// is not an integer in [0, vocab) reads and writes nothing (forward writes zeros for it),
// so bad data cannot reach memory outside the table.
#include "kernels/act.cuh"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain::kernels {
namespace {

// The id an activation holds, or -1 when it is not an integer in [0, vocab).
template <typename T>
__device__ __forceinline__ int token_id(T value, int vocab) {
  const float f = as_float(value);
  if (!(f >= 0.0f && f < static_cast<float>(vocab))) return -1;  // NaN too
  const int id = static_cast<int>(f);
  return static_cast<float>(id) == f ? id : -1;
}

// One thread per output element: the table's compute copy is copied as stored.
template <typename T>
__global__ void embedding_forward_kernel(const T* ids, const T* table, T* out, int rows, int vocab,
                                         int dim) {
  const size_t d = static_cast<size_t>(dim);
  HT_GRID_STRIDE(e, static_cast<size_t>(rows) * d) {
    const int id = token_id(ids[e / d], vocab);
    out[e] = id >= 0 ? table[static_cast<size_t>(id) * d + e % d] : to_act<T>(0.0f);
  }
}

// Block (v, column tile) sums the rows of dy whose id is v into dtable[v] for its columns,
// in row order, one thread per column: deterministic and bit for bit the CPU's sums,
// without atomics. Every block reads every id (through shared memory, a tile of the block's
// width at a time), so the work is O(vocab x rows) id reads beside the O(rows x dim) adds:
// fine for character and small word vocabularies; a large vocabulary would want the rows
// sorted by id first.
template <typename T>
__global__ void embedding_backward_kernel(const T* ids, const T* dy, float* dtable, int rows,
                                          int vocab, int dim) {
  __shared__ int tile[kBlock];
  const int v = static_cast<int>(blockIdx.x);
  const int j = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  const int width = static_cast<int>(blockDim.x);
  float sum = 0.0f;
  for (int base = 0; base < rows; base += width) {
    const int r = base + static_cast<int>(threadIdx.x);
    tile[threadIdx.x] = r < rows ? token_id(ids[r], vocab) : -1;
    __syncthreads();
    const int n = min(width, rows - base);
    if (j < dim) {
      for (int k = 0; k < n; ++k) {
        if (tile[k] == v) sum += as_float(dy[static_cast<size_t>(base + k) * dim + j]);
      }
    }
    __syncthreads();  // the tile is read before the next one overwrites it
  }
  if (j < dim) dtable[static_cast<size_t>(v) * dim + j] = sum;
}

}  // namespace

void embedding_forward(DType t, const void* ids, const void* table, void* out, int rows, int vocab,
                       int dim, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * dim;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    embedding_forward_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        static_cast<const T*>(ids), static_cast<const T*>(table), static_cast<T*>(out), rows, vocab,
        dim);
  });
  check_launch("embedding_forward");
}

void embedding_backward(DType t, const void* ids, const void* dy, float* dtable, int rows,
                        int vocab, int dim, cudaStream_t stream) {
  if (vocab == 0 || dim == 0) return;
  // A block as wide as the columns (whole warps, at most kBlock); column tiles in y.
  const int width = std::min(kBlock, (dim + 31) / 32 * 32);
  const dim3 grid(static_cast<unsigned>(vocab), static_cast<unsigned>((dim + width - 1) / width));
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    embedding_backward_kernel<<<grid, width, 0, stream>>>(
        static_cast<const T*>(ids), static_cast<const T*>(dy), dtable, rows, vocab, dim);
  });
  check_launch("embedding_backward");
}

}  // namespace hpctrain::kernels
