// A checkpoint's whole-file checksum (format version 2): 24 bytes appended after the HDF5
// file, past its end of allocation, where the HDF5 library never looks:
//   "HTCKSUM1" | uint64 LE: bytes covered (all before the footer) | uint32 LE: their
//   CRC-32C | uint32 LE: CRC-32C of the 20 footer bytes before it
// Readers verify it before the HDF5 library parses any byte, so a corrupted file (a flipped
// bit that could send the parser into a loop, or change the cursor or the config while
// every array still matches its own checksum) is refused after one sequential read.
#pragma once

#include <cstddef>
#include <string>

namespace hpctrain {

inline constexpr size_t kFooterBytes = 24;

// Appends the footer to the finished file at `path`; throws Error naming it on failure.
void append_checksum_footer(const std::string& path);

enum class Footer { kValid, kAbsent };
// kValid when the file ends in a footer that matches its bytes; kAbsent when it ends in
// none (a file of format version 1). Throws UsageError naming the file when a footer is
// there but does not match, Error when the file cannot be read.
Footer verify_checksum_footer(const std::string& path);

// Whether the file ends in a footer's magic, whatever the rest holds: a checkpoint of
// format version 2, damaged or not. Throws Error when the file cannot be read.
bool ends_in_checksum_footer(const std::string& path);

}  // namespace hpctrain
