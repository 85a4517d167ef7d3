// Pooling window validation and its architecture text.
#include "nn/pool_shape.hpp"

#include <limits>

#include "core/error.hpp"

namespace hpctrain {

Pool2dShape pool_shape(const std::string& layer, const char* type, const Dims& input, int kernel,
                       int stride, int padding) {
  const std::string what = "layer " + layer + ": " + type;
  if (kernel < 1 || stride < 1 || padding < 0 || 2 * padding > kernel) {
    throw UsageError(what + " needs kernel >= 1, stride >= 1 and 0 <= padding <= kernel / 2");
  }
  if (input.size() != 3) {
    throw UsageError(what + " expects [channels, height, width] inputs, got " +
                     std::to_string(input.size()) + "-D ones");
  }
  for (int64_t d : input) {
    if (d > std::numeric_limits<int>::max() / 4) throw UsageError(what + ": input too large");
  }
  Pool2dShape s{0,
                static_cast<int>(input[0]),
                static_cast<int>(input[1]),
                static_cast<int>(input[2]),
                kernel,
                kernel,
                stride,
                stride,
                padding,
                padding};
  if (s.h + 2 * padding < kernel || s.w + 2 * padding < kernel) {
    throw UsageError(what + ": input " + std::to_string(s.h) + "x" + std::to_string(s.w) +
                     " with padding " + std::to_string(padding) + " is smaller than the " +
                     std::to_string(kernel) + "x" + std::to_string(kernel) + " window");
  }
  return s;
}

std::string pool_attributes(const Pool2dShape& s) {
  auto pair = [](int a, int b) { return std::to_string(a) + "x" + std::to_string(b); };
  return "k=" + pair(s.kh, s.kw) + " s=" + pair(s.stride_h, s.stride_w) +
         " p=" + pair(s.pad_h, s.pad_w);
}

}  // namespace hpctrain
