// Stratified split: read the labels (4 bytes a row), decide every row's part per class with
// a seeded permutation and largest-remainder counts, then stream the rows once through
// route_rows into one writer per part.
#include "data-tools/split.hpp"

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/row_copy.hpp"
#include "data/dataset_file.hpp"
#include "data/sampler.hpp"

namespace hpctrain {
namespace {

constexpr int64_t kMaxWeight = 1000000;
constexpr size_t kMaxParts = 16;
constexpr uint64_t kSplitStream = 0x73706c6974ULL;  // "split": this use's own Rng stream

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  size_t pos = 0;
  while (true) {
    const size_t end = text.find(',', pos);
    items.push_back(text.substr(pos, end == std::string::npos ? end : end - pos));
    if (end == std::string::npos) return items;
    pos = end + 1;
  }
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

std::vector<int64_t> parse_split_weights(const std::string& text, const std::string& what) {
  std::vector<int64_t> weights;
  for (const std::string& item : split_commas(text)) {
    const bool digits = !item.empty() && item.size() <= 7 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    const int64_t w = digits ? std::stoll(item) : 0;
    if (w < 1 || w > kMaxWeight) {
      throw UsageError(what + ": expected comma-separated integers in [1, " +
                       std::to_string(kMaxWeight) + "] such as 85,2,13, got '" + text + "'");
    }
    weights.push_back(w);
  }
  if (weights.size() < 2 || weights.size() > kMaxParts) {
    throw UsageError(what + ": expected 2 to " + std::to_string(kMaxParts) + " parts, got '" +
                     text + "'");
  }
  return weights;
}

std::vector<std::string> parse_split_names(const std::string& text, size_t parts,
                                           const std::string& what) {
  const std::vector<std::string> names = split_commas(text);
  if (names.size() != parts) {
    throw UsageError(what + ": " + std::to_string(names.size()) + " names for " +
                     std::to_string(parts) + " parts, got '" + text + "'");
  }
  std::set<std::string> seen;
  for (const std::string& n : names) {
    const bool plain = !n.empty() && n.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-") == std::string::npos;
    if (!plain) {
      throw UsageError(what + ": part name '" + n + "' must be letters, digits, '_' or '-'");
    }
    if (!seen.insert(n).second) throw UsageError(what + ": part name '" + n + "' repeats");
  }
  return names;
}

std::vector<std::string> default_split_names(size_t parts) {
  if (parts == 2) return {"train", "test"};
  if (parts == 3) return {"train", "val", "test"};
  std::vector<std::string> names;
  for (size_t p = 0; p < parts; ++p) names.push_back("part" + std::to_string(p));
  return names;
}

std::string split_output_path(const std::string& prefix, const std::string& name) {
  return prefix + "-" + name + ".h5";
}

std::vector<uint8_t> stratified_parts(const std::vector<int32_t>& labels, int num_classes,
                                      const std::vector<int64_t>& weights, uint64_t seed) {
  HT_REQUIRE(weights.size() <= kMaxParts, "stratified_parts: too many parts");
  // 1. Rows of each class, in row order.
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    HT_REQUIRE(labels[i] >= 0 && labels[i] < num_classes, "stratified_parts: label range");
    rows_of[static_cast<size_t>(labels[i])].push_back(static_cast<int64_t>(i));
  }
  // 2. Per class: permute (Fisher-Yates, its own seeded stream), then deal out the counts.
  std::vector<uint8_t> part(labels.size(), 0);
  for (size_t k = 0; k < rows_of.size(); ++k) {
    std::vector<int64_t>& rows = rows_of[k];
    Rng rng(mix_seed(seed, k, kSplitStream));
    for (size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[rng.uniform_int(i)]);
    const std::vector<int64_t> counts = apportion(static_cast<int64_t>(rows.size()), weights);
    size_t next = 0;
    for (size_t p = 0; p < counts.size(); ++p) {
      for (int64_t j = 0; j < counts[p]; ++j) part[static_cast<size_t>(rows[next++])] = p;
    }
  }
  return part;
}

SplitReport split_data_file(const std::string& input, const std::string& out_prefix,
                            const SplitOptions& options) {
  const size_t parts = options.weights.size();
  HT_REQUIRE(parts >= 2 && parts <= kMaxParts && options.names.size() == parts,
             "split_data_file: one name per weight, 2 to 16 parts");
  SplitReport report;
  for (const std::string& name : options.names) {
    report.paths.push_back(split_output_path(out_prefix, name));
  }
  check_outputs_differ(input, report.paths);
  const DatasetFile src(input);
  require_images(src);
  const DatasetShape& shape = src.shape();

  // 1. Labels whole (small next to the images), then every row's part.
  std::vector<int32_t> labels(static_cast<size_t>(shape.n));
  const int64_t block = int64_t{1} << 20;
  for (int64_t start = 0; start < shape.n; start += block) {
    src.read_labels(start, std::min(block, shape.n - start), labels.data() + start);
  }
  const std::vector<uint8_t> part =
      stratified_parts(labels, shape.num_classes, options.weights, options.seed);
  report.rows.assign(parts, 0);
  report.per_class.assign(parts, std::vector<int64_t>(static_cast<size_t>(shape.num_classes), 0));
  for (size_t i = 0; i < part.size(); ++i) {
    ++report.rows[part[i]];
    ++report.per_class[part[i]][static_cast<size_t>(labels[i])];
  }
  for (size_t p = 0; p < parts; ++p) {
    if (report.rows[p] == 0) {
      throw UsageError(input + ": part '" + options.names[p] + "' would be empty (" +
                       std::to_string(shape.n) + " rows are too few for weights " +
                       std::to_string(options.weights[p]) + " of " +
                       std::to_string(std::accumulate(options.weights.begin(),
                                                      options.weights.end(), int64_t{0})) +
                       ")");
    }
  }
  labels = {};

  // 2. One pass over the rows into one writer per part.
  std::vector<std::string> weight_text;
  for (int64_t w : options.weights) weight_text.push_back(std::to_string(w));
  std::vector<std::unique_ptr<DatasetWriter>> writers;
  std::vector<DatasetWriter*> targets;
  for (size_t p = 0; p < parts; ++p) {
    const std::string how = "part '" + options.names[p] + "' of a split of " + input +
                            " by hpctrain-data (weights " + join(weight_text, ":") + " for " +
                            join(options.names, ":") + ", stratified by class, seed " +
                            std::to_string(options.seed) + ")";
    writers.push_back(std::make_unique<DatasetWriter>(
        report.paths[p], derived_writer_options(src, how, options.deflate_level)));
    targets.push_back(writers.back().get());
  }
  route_rows(src, part, targets);
  commit_together(targets);
  return report;
}

}  // namespace hpctrain
