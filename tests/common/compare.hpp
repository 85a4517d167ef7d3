// Host-side helpers of the tests that compare one backend's or kernel's results with the
// CPU backend's (tests/gpu, tests/emu): random inputs, bit-for-bit and element-wise
// comparisons of float results, and the NCHW -> NHWC reordering of host data.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/random.hpp"

namespace hpctrain::test {

// n normal values times scale, from seed.
inline std::vector<float> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal() * scale);
  return v;
}

// Bit for bit (any NaN matches any NaN: its payload is not specified); stops at the first
// mismatch.
inline void expect_same(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << "[" << i << "]";
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << what << "[" << i << "]: " << got[i] << " != " << want[i];
    }
  }
}

// ||got - want|| / ||want|| over the elements [begin, end) (all by default); the norm of the
// difference itself where want is zero there.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want,
                             size_t begin = 0, size_t end = SIZE_MAX) {
  end = std::min(end, want.size());
  double diff = 0.0, norm = 0.0;
  for (size_t i = begin; i < end; ++i) {
    const double e = static_cast<double>(got[i]) - want[i];
    diff += e * e;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Element-wise |got - want| <= tol * max(1, |want|); stops at the first mismatch.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i];
    ASSERT_NEAR(got[i], w, tol * std::max(1.0, std::fabs(w))) << what << "[" << i << "]";
  }
}

// NCHW [n][c][cells] to NHWC [n][cells][c].
template <typename T>
std::vector<T> to_nhwc(const std::vector<T>& v, int n, int c, int cells) {
  std::vector<T> out(v.size());
  for (int b = 0; b < n; ++b) {
    for (int ch = 0; ch < c; ++ch) {
      for (int i = 0; i < cells; ++i) {
        out[(static_cast<size_t>(b) * cells + i) * c + ch] =
            v[(static_cast<size_t>(b) * c + ch) * cells + i];
      }
    }
  }
  return out;
}

}  // namespace hpctrain::test
