// SHA-256 (FIPS 180-4), used for params_sha256 so two runs compare bit for bit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hpctrain {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  std::array<uint8_t, 32> finish();
  std::string finish_hex();

 private:
  void compress(const uint8_t* block);

  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace hpctrain
