// Launch helpers shared by the kernel files: grid sizes and the grid-stride loop for
// element-wise kernels, and the launch-error check.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

// A grid-stride loop: i runs over [0, n), each thread from its global index by the grid's
// size (kernels launched with grid_for).
#define HT_GRID_STRIDE(i, n)                                                           \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

namespace hpctrain::kernels {

constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n elements (capped: each thread loops).
inline unsigned grid_for(size_t n) {
  const size_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, 65535));
}

// Throws if the last launch failed (bad configuration); errors of the running kernel
// surface at the next synchronising call. A fault of an earlier kernel (an illegal address)
// sticks to the context and is reported by the next launch: the message says so.
inline void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    const bool launch = e == cudaErrorInvalidConfiguration || e == cudaErrorInvalidValue ||
                        e == cudaErrorLaunchOutOfResources || e == cudaErrorInvalidDeviceFunction;
    throw std::runtime_error(std::string("CUDA kernel ") + kernel +
                             (launch
                                  ? " failed to launch: "
                                  : " found an error of earlier device work (HPCTRAIN_CUDA_SYNC=1 "
                                    "names the operation): ") +
                             cudaGetErrorString(e));
  }
}

}  // namespace hpctrain::kernels
