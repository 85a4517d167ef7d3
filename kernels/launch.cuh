// Launch helpers shared by the kernel files: grid sizes for element-wise loops and the
// launch-error check.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace hpctrain::kernels {

constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n elements (capped: each thread loops).
inline unsigned grid_for(size_t n) {
  const size_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, 65535));
}

// Throws if the last launch failed (bad configuration); errors of the running kernel
// surface at the next synchronising call.
inline void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA kernel ") + kernel +
                             " failed to launch: " + cudaGetErrorString(e));
  }
}

}  // namespace hpctrain::kernels
