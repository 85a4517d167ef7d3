// The fixture of the tests that compare the CUDA backend with 16-bit activations against
// the CPU backend with the same activation type (test_cuda_mixed.cpp,
// test_cuda_mixed_layers.cpp), parameterised by the type, and their shared inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"
#include "core/convert.hpp"
#include "core/dtype.hpp"
#include "core/random.hpp"

namespace hpctrain::test {

// Float32 results from identical inputs, summed in another order.
inline constexpr double kSums = 1e-4;

// Each of `planes` planes of `plane` values a shuffled ramp of multiples of 1/8 (exact in
// both 16-bit types): no pooling window holds two equal maxima, whose gradient the
// backends could give to different cells.
inline std::vector<float> distinct_planes(size_t planes, size_t plane, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(planes * plane);
  for (size_t p = 0; p < planes; ++p) {
    float* ramp = v.data() + p * plane;
    for (size_t i = 0; i < plane; ++i) {
      ramp[i] = static_cast<float>(static_cast<int>(i) - static_cast<int>(plane / 2)) * 0.125f;
    }
    for (size_t i = plane - 1; i > 0; --i) std::swap(ramp[i], ramp[rng.uniform_int(i + 1)]);
  }
  return v;
}

inline std::string type_name(const ::testing::TestParamInfo<DType>& info) {
  return info.param == DType::kBF16 ? "bf16" : "fp16";
}

class MixedVsCpu : public ::testing::TestWithParam<DType> {
 protected:
  MixedVsCpu() : t_(GetParam()), cpu_(1, CpuBackend::kDefaultConvChunkBytes, false, GetParam()) {}
  void SetUp() override { gpu_ = make_gpu(false); }

  // Synchronised after every operation, so that an error names the operation.
  std::unique_ptr<Backend> make_gpu(bool deterministic, bool channels_last = false) const {
    CudaBackendOptions o;
    o.act_type = t_;
    o.deterministic = deterministic;
    o.channels_last = channels_last;
    o.sync_each_call = true;
    return make_cuda_backend(o);
  }

  // One rounding to the activation type (8 significant bits for bfloat16, 11 for
  // float16), relative, with room for the float results before it to differ slightly.
  double act_tol() const { return t_ == DType::kBF16 ? 1e-2 : 2e-3; }

  // `v` rounded to the activation type, stored as such: the CPU backend's memory is host
  // memory, so its operations take these vectors directly.
  std::vector<uint16_t> act(const std::vector<float>& v) const {
    std::vector<uint16_t> a(v.size());
    from_float(t_, v.data(), a.data(), v.size());
    return a;
  }
  std::vector<float> widen(const std::vector<uint16_t>& a) const {
    std::vector<float> v(a.size());
    to_float(t_, a.data(), v.data(), a.size());
    return v;
  }

  // A device copy of `host` on the GPU backend, freed with the test.
  template <typename T>
  T* up(const std::vector<T>& host) {
    arrays_.emplace_back(*gpu_, host.size() * sizeof(T));
    gpu_->copy_to_device(arrays_.back().data(), host.data(), host.size() * sizeof(T));
    return reinterpret_cast<T*>(arrays_.back().data());
  }
  std::vector<float> down(const float* p, size_t n) {
    std::vector<float> h(n);
    gpu_->copy_to_host(h.data(), p, n * sizeof(float));
    return h;
  }
  // n activations on the device, widened to float.
  std::vector<float> down_act(const void* p, size_t n) {
    std::vector<uint16_t> h(n);
    gpu_->copy_to_host(h.data(), p, n * sizeof(uint16_t));
    return widen(h);
  }

  DType t_;
  CpuBackend cpu_;
  std::unique_ptr<Backend> gpu_;
  std::vector<DeviceArray<std::byte>> arrays_;
};

}  // namespace hpctrain::test
