// What every fuzz target shares: the input written to a file of this process's own (the
// readers under test take paths), the rule for what a reader may throw, and the set-up.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "h5/h5.hpp"

namespace hpctrain::fuzz {

// Writes `data` to one file per process and target (rewritten on every call) and returns its
// path. The name carries `suffix`, which some readers use to tell file kinds apart.
inline const std::string& write_input(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [suffix] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/hpctrain-fuzz-" +
           std::to_string(getpid()) + suffix;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

// Runs `read` on the input. A UsageError (bad input: exit 2 naming the file) is the answer
// the readers must give for anything they refuse; any other exception, a crash or a hang is
// a finding, reported by aborting so libFuzzer keeps the input.
template <typename Read>
void expect_usage_error_or_success(Read&& read) {
  try {
    read();
  } catch (const UsageError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: not a UsageError: %s\n", e.what());
    std::abort();
  }
}

}  // namespace hpctrain::fuzz

// Once per fuzzing process (each target is one translation unit): HDF5's error stack
// printing off, as every hpctrain program has it.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hpctrain::h5_quiet();
  return 0;
}
