// CRC-32C (Castagnoli), the checksum of checkpoint arrays. Uses the SSE4.2 crc32
// instruction where the CPU has it (several GB/s, so checksumming never limits a
// checkpoint write) and an equivalent table-driven loop elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpctrain {

// CRC-32C of `bytes` bytes at `data`, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);
// The portable implementation (exposed so tests can compare the two).
uint32_t crc32c_portable(const void* data, size_t bytes, uint32_t crc = 0);

}  // namespace hpctrain
