// The fixture of the kernel emulation tests (tests/emu/test_emu_*.cpp): kernels/ run on
// the host by the CUDA emulation (emu/cuda_emu.hpp) against the CPU backend with the same
// activation type (float32, bfloat16, float16), so that CI, which has no GPU, checks the
// kernels' indexing, packing, shared-memory merges and rounding, under AddressSanitizer
// (an access outside a buffer fails the test as it would fail compute-sanitizer). Each
// kernel call runs with threads and blocks in forward and in reverse order, and the two
// results must agree bit for bit (a race would not). Scratch and outputs start as NaN, so
// a value a kernel reads but nobody wrote shows.
//
// Tolerances as in tests/gpu/test_cuda_mixed.cpp: one rounding of the activation type for
// values reduced in another order than the CPU's, 1e-4 for float32 sums; element-wise
// results bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "common/compare.hpp"
#include "core/convert.hpp"
#include "core/dtype.hpp"
#include "emu/cuda_emu.hpp"  // before kernels/: renames hpctrain::kernels to kernels_emu
#include "kernels/kernels.hpp"

namespace hpctrain::test {

constexpr double kSums = 1e-4;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr cudaStream_t kStream = nullptr;

// Runs f (which recomputes everything from its inputs and returns all its results) with
// forward and with reverse thread order; the two must agree bit for bit.
inline std::vector<std::vector<float>> both_orders(
    const std::function<std::vector<std::vector<float>>()>& f) {
  emu::set_order(emu::Order::kForward);
  const auto forward = f();
  emu::set_order(emu::Order::kReverse);
  const auto reverse = f();
  emu::set_order(emu::Order::kForward);
  EXPECT_EQ(forward.size(), reverse.size());
  for (size_t k = 0; k < std::min(forward.size(), reverse.size()); ++k) {
    expect_same(reverse[k], forward[k], "result " + std::to_string(k) + " in reverse order");
  }
  return forward;
}

inline std::string type_name(const ::testing::TestParamInfo<DType>& info) {
  return to_string(info.param);
}

// The results of one run, for both_orders.
template <typename... V>
std::vector<std::vector<float>> results(V... v) {
  return {std::vector<float>(std::move(v))...};
}

// Activations of one type in host memory, `offset` values after a 16-byte boundary (an
// offset of 1 makes the kernels take their one-value path).
class Acts {
 public:
  Acts(DType t, size_t n, size_t offset = 0)
      : t_(t), n_(n), offset_(offset), bytes_((n + offset) * dtype_size(t) + 16) {}
  Acts(DType t, const std::vector<float>& v, size_t offset = 0) : Acts(t, v.size(), offset) {
    from_float(t_, v.data(), data(), n_);
  }
  static Acts nan(DType t, size_t n, size_t offset = 0) {
    return Acts(t, std::vector<float>(n, kNaN), offset);
  }
  void* data() { return bytes_.data() + offset_ * dtype_size(t_); }
  const void* data() const { return bytes_.data() + offset_ * dtype_size(t_); }
  std::vector<float> floats() const {
    std::vector<float> v(n_);
    to_float(t_, data(), v.data(), n_);
    return v;
  }

 private:
  DType t_;
  size_t n_, offset_;
  std::vector<std::byte> bytes_;
};

class EmuVsCpu : public ::testing::TestWithParam<DType> {
 protected:
  EmuVsCpu() : t_(GetParam()), cpu_(1, CpuBackend::kDefaultConvChunkBytes, false, GetParam()) {}

  // One rounding to the activation type, relative; float32 results reduce in another
  // order than the CPU's.
  double act_tol() const { return t_ == DType::kBF16 ? 1e-2 : t_ == DType::kF16 ? 2e-3 : 1e-5; }
  Acts acts(const std::vector<float>& v, size_t offset = 0) const { return Acts(t_, v, offset); }

  DType t_;
  CpuBackend cpu_;
};

}  // namespace hpctrain::test
