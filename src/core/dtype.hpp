// The element types of activations: float32, and the 16-bit types of mixed precision
// (bfloat16, IEEE float16). Plain C++17 (kernels/ includes it); the host conversions are
// in core/convert.hpp.
#pragma once

#include <cstddef>

namespace hpctrain {

enum class DType { kF32, kBF16, kF16 };

constexpr size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }

inline const char* to_string(DType t) {
  return t == DType::kF32 ? "float32" : t == DType::kBF16 ? "bfloat16" : "float16";
}

}  // namespace hpctrain
