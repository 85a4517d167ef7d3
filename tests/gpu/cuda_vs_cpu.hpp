// The fixture of the tests that compare the CUDA backend with the CPU backend on float32
// (test_cuda_ops.cpp, test_cuda_models.cpp): a GPU backend per test and device copies of
// host vectors, freed with the test. Element-wise kernels must agree within kElementwise
// relative; operations that sum many terms (GEMM, convolution, batch statistics) within
// kSums, as their summation order differs.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"

namespace hpctrain::test {

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override { gpu_ = make_cuda_backend({}); }

  // A device copy of `host` on the GPU backend.
  float* up(const std::vector<float>& host) {
    arrays_.emplace_back(*gpu_, host.size());
    gpu_->copy_to_device(arrays_.back().data(), host.data(), host.size() * sizeof(float));
    return arrays_.back().data();
  }
  std::vector<float> down(const float* p, size_t n) {
    std::vector<float> h(n);
    gpu_->copy_to_host(h.data(), p, n * sizeof(float));
    return h;
  }

  CpuBackend cpu_{1};
  std::unique_ptr<Backend> gpu_;
  std::vector<DeviceArray<float>> arrays_;
};

inline constexpr double kElementwise = 1e-5, kSums = 1e-4;

}  // namespace hpctrain::test
