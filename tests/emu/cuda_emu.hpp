// A CPU emulation of the CUDA execution model, enough to run kernels/ on the host in tests
// where no GPU is present (CI): each thread of a block is a fiber (cuda_emu.cpp) on the
// calling thread, blocks run one after another, and device memory is host memory. __syncthreads()
// and warp shuffles switch fibers, so barriers, shared memory and shuffles behave as on a
// GPU; a barrier or shuffle that not every live thread reaches fails the launch, as does a
// shuffle in a warp with exited lanes (undefined on a GPU).
//
// Between synchronisation points the fibers of a block run one at a time, in thread order
// or (Order::kReverse) the reverse, blocks likewise: a kernel whose result depends on that
// order (a race) gives different results in the two orders, which the tests compare.
//
// Force-included before each kernel source, which tests/emu/rewrite_launches.py first
// turns into C++: `k<<<grid, block, shared, stream>>>(args)` becomes
// `::emu::launch(grid, block, shared, stream, [](auto... emu_args) { k(emu_args...); },
// args)`. The namespace hpctrain::kernels is renamed kernels_emu (macro below), so the
// emulated kernels link beside the real ones.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <type_traits>

namespace emu {

// The running thread's coordinates (the built-in variables).
struct Coordinates {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};
extern Coordinates here;

enum class Order { kForward, kReverse };
// The order of threads and blocks for later launches (kForward to start).
void set_order(Order order);

// Runs body in each thread of a grid; throws std::runtime_error on an invalid
// configuration (recorded for cudaGetLastError instead), a deadlock or a barrier that not
// all threads reach, and rethrows what a thread threw.
void run_grid(dim3 grid, dim3 block, const std::function<void()>& body);

void syncthreads();
// Lane (lane ^ lane_mask)'s `bytes` bytes at v into out, within the calling warp.
void exchange(unsigned mask, const void* v, void* out, size_t bytes, int lane_mask);

template <typename T>
T shfl_xor(unsigned mask, T v, int lane_mask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8);
  T out;
  exchange(mask, &v, &out, sizeof(T), lane_mask);
  return out;
}

// The last launch's configuration error, reset by reading (cudaGetLastError).
cudaError_t last_error();
const char* error_string(cudaError_t e);

// A launch: `kernel` calls the kernel with its arguments (copies, as a launch makes).
template <typename K, typename... A>
void launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t /*stream*/, K kernel,
            A... args) {
  if (shared_bytes != 0) throw std::logic_error("emu: dynamic shared memory is not emulated");
  run_grid(grid, block, [&] { kernel(args...); });
}

}  // namespace emu

// The device functions and names kernels/ uses, on the host.
template <typename A, typename B>
constexpr std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <typename A, typename B>
constexpr std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}

#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)
#define threadIdx (::emu::here.thread)
#define blockIdx (::emu::here.block)
#define blockDim (::emu::here.block_dim)
#define gridDim (::emu::here.grid_dim)
#define __syncthreads() ::emu::syncthreads()
// The round-to-nearest float operations that nvcc never fuses; the host's float arithmetic
// rounds each operation alike (no FMA contraction without -mfma).
#define __fmul_rn(a, b) ((a) * (b))
#define __fsub_rn(a, b) ((a) - (b))
#define __shfl_xor_sync(mask, v, lane_mask) ::emu::shfl_xor(mask, v, lane_mask)
#define cudaGetLastError() ::emu::last_error()
#define cudaGetErrorString(e) ::emu::error_string(e)
#define kernels kernels_emu
