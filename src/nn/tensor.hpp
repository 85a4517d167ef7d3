// A non-owning view of a batch of samples in device memory: `batch` samples, each
// of shape `dims` (C,H,W or features), stored contiguously (NCHW), as values of the
// backend's activation type (Backend::act_type()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

using Dims = std::vector<int64_t>;

// "1x28x28": dims joined by 'x' (model descriptions, messages).
inline std::string dims_text(const Dims& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(d[i]);
  }
  return s;
}

inline int64_t dims_elems(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

struct Tensor {
  void* data = nullptr;
  int64_t batch = 0;
  Dims dims;
  int64_t sample_elems() const { return dims_elems(dims); }
  int64_t elems() const { return batch * sample_elems(); }
};

}  // namespace hpctrain
