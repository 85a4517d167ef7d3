// libFuzzer target: opening and validating a data file (data/dataset_file): the header
// checks, then the first rows and labels read the way the loader reads them. Any input is
// either refused with a UsageError or gives rows that passed every check.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/dataset_file.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpctrain;
  const std::string& path = fuzz::write_input(data, size, ".h5");
  fuzz::expect_usage_error_or_success([&] {
    const DatasetFile file(path);
    const DatasetShape& shape = file.shape();
    // A few rows, as a batch would read them; samples past 1 MiB are the loader's memory
    // bounds to refuse (docs/contracts.md), not the file reader's.
    const int64_t rows = std::min<int64_t>(shape.n, 4);
    if (rows == 0 || shape.sample_bytes() > (size_t{1} << 20)) return;
    std::vector<uint8_t> images(static_cast<size_t>(rows) * shape.sample_bytes());
    std::vector<int32_t> labels(static_cast<size_t>(rows * shape.labels_per_sample));
    file.read_rows(0, rows, images.data(), labels.data());
    const int64_t picked[] = {0, rows - 1};
    file.read_row_set(picked, rows > 1 ? 2 : 1, images.data(), labels.data());
  });
  return 0;
}
