// libFuzzer target: the checkpoint reader past its whole-file checksum. The input is taken
// as the HDF5 body of a checkpoint and given a matching footer, so every input reaches the
// HDF5 parser and the reader's own checks (a file whose footer fails is refused before them;
// tests/fuzz/checkpoint_flip_sweep.py covers that side). read_checkpoint_file and inspect
// either refuse it with a UsageError or accept a state whose arrays all verified.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/checkpoint_footer.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpctrain;
  const std::string& path = fuzz::write_input(data, size, ".h5");
  append_checksum_footer(path);
  fuzz::expect_usage_error_or_success([&] { read_checkpoint_file(path); });
  fuzz::expect_usage_error_or_success([&] {
    std::ostringstream out;
    inspect_checkpoint_file(path, out);
  });
  return 0;
}
