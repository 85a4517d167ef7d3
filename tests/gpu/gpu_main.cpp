// The main of the GPU test binaries: they exit 77 (ctest: skipped) when no CUDA device is
// visible, saying so, and test device 0 otherwise.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "backend/cuda_backend.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // cuBLAS repeats bit for bit with a fixed workspace configuration (its docs; PyTorch's
  // deterministic mode asks for the same); the tests that run twice and compare need it.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  const int devices = hpctrain::cuda_device_count();
  if (devices == 0) {
    std::printf("no CUDA device found: GPU tests skipped\n");
    return 77;
  }
  std::printf("%d CUDA device(s); testing device 0\n", devices);
  return RUN_ALL_TESTS();
}
