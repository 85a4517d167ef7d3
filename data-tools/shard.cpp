// Contiguous shards: compute the boundaries, then copy each range block by block into its
// own writer, so only one output file is open at a time whatever the number of shards.
#include "data-tools/shard.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/output_set.hpp"
#include "data-tools/row_copy.hpp"
#include "data/dataset_file.hpp"

namespace hpctrain {
namespace {

// "00002-of-00008" and the like: the middle of a shard's name, whatever the count.
bool shard_name_middle(const std::string& middle) {
  const size_t of = middle.find("-of-");
  const auto digits = [](const std::string& t) {
    return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
  };
  return of != std::string::npos && digits(middle.substr(0, of)) && digits(middle.substr(of + 4));
}

}  // namespace

std::string shard_output_path(const std::string& prefix, int64_t index, int64_t parts) {
  const size_t digits = std::max<size_t>(5, std::to_string(parts).size());
  const auto padded = [digits](int64_t v) {
    const std::string t = std::to_string(v);
    return std::string(digits - std::min(digits, t.size()), '0') + t;
  };
  return prefix + "-" + padded(index) + "-of-" + padded(parts) + ".h5";
}

std::vector<int64_t> shard_bounds(int64_t n, int64_t parts) {
  HT_REQUIRE(n >= 0 && parts >= 1, "shard_bounds: bad arguments");
  std::vector<int64_t> bounds(static_cast<size_t>(parts) + 1, 0);
  const int64_t base = n / parts, extra = n % parts;
  for (int64_t i = 0; i < parts; ++i) {
    bounds[static_cast<size_t>(i) + 1] = bounds[static_cast<size_t>(i)] + base + (i < extra);
  }
  return bounds;
}

ShardReport shard_data_file(const std::string& input, const std::string& out_prefix, int64_t parts,
                            int deflate_level) {
  if (parts < 1) throw UsageError(input + ": --parts must be at least 1");
  const DatasetFile src(input);
  require_images(src);
  const int64_t n = src.shape().n;
  if (parts > n) {
    const std::string count = std::to_string(parts);
    throw UsageError(input + ": --parts " + count + ": " + count + " shards of " +
                     std::to_string(n) + " rows would leave some empty");
  }
  ShardReport report;
  report.bounds = shard_bounds(n, parts);
  for (int64_t i = 0; i < parts; ++i)
    report.paths.push_back(shard_output_path(out_prefix, i, parts));
  check_outputs_differ(input, report.paths);
  // The shards of an earlier run with another count go with the set they belonged to.
  const std::vector<std::string> earlier = earlier_set_files(
      out_prefix, report.paths, input, "a shard of an earlier run",
      [](const std::string& middle, const std::string&) { return shard_name_middle(middle); });

  // Each shard finished in turn, all renamed at the end: never shards of two inputs.
  std::vector<std::unique_ptr<DatasetWriter>> writers;
  std::vector<DatasetWriter*> done;
  for (int64_t i = 0; i < parts; ++i) {
    const auto idx = static_cast<size_t>(i);
    const int64_t start = report.bounds[idx], end = report.bounds[idx + 1];
    const std::string how = "shard " + std::to_string(i) + " of " + std::to_string(parts) +
                            " (rows [" + std::to_string(start) + ", " + std::to_string(end) +
                            ")) of " + input + " by hpctrain-data";
    writers.push_back(std::make_unique<DatasetWriter>(
        report.paths[idx], derived_writer_options(src, how, deflate_level)));
    copy_row_range(src, start, end - start, *writers.back());
    writers.back()->finish();
    done.push_back(writers.back().get());
  }
  commit_together(done, earlier);
  return report;
}

}  // namespace hpctrain
