// Sharding a data file into N files of contiguous row ranges whose sizes differ by at most
// one (the first n % N shards hold the extra row), streamed one shard at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

// PREFIX-00002-of-00008.h5 for shard 2 of 8 (zero-based; at least five digits, so the
// names sort in shard order).
std::string shard_output_path(const std::string& prefix, int64_t index, int64_t parts);

// The parts + 1 row boundaries: shard i holds rows [bounds[i], bounds[i + 1]).
std::vector<int64_t> shard_bounds(int64_t n, int64_t parts);

struct ShardReport {
  std::vector<std::string> paths;
  std::vector<int64_t> bounds;
};

// Writes `parts` shards of `input` (same sample type, shape, class names; the source
// attribute extended by the row range). Earlier shards under the same prefix of another
// count (PREFIX-DIGITS-of-DIGITS.h5) are removed with the files it replaces, before the new
// ones are renamed. Throws UsageError if parts is below 1 or above the number of rows (a
// shard would be empty; naming --parts), or an output is the input, or the input is one of
// the earlier shards.
ShardReport shard_data_file(const std::string& input, const std::string& out_prefix, int64_t parts,
                            int deflate_level);

}  // namespace hpctrain
