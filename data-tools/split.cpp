// Stratified split: read the labels (4 bytes a row), decide how many rows of each class go
// to each part (for all classes together, so that the part totals are those of the whole
// set), pick them with a seeded permutation per class, then stream the rows once through
// route_rows into one writer per part.
#include "data-tools/split.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/output_set.hpp"
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

std::string join(const std::vector<int64_t>& values, const char* sep) {
  std::vector<std::string> items;
  for (int64_t v : values) items.push_back(std::to_string(v));
  return join(items, sep);
}

// How many rows of each class go to each part. A cell (class k, part p) gets its floor,
// floor(n_k * w_p / W), and perhaps extra rows; the extras of a class add up to the rows its
// floors leave over (fewer than the parts), and those of a part to what apportion(n, weights)
// gives it beyond the floors of all classes. Which cells can take them depends on a class
// only through n_k mod W, so classes are grouped by it and x[g][p] of the classes of group g
// get an extra row in part p, dealt round-robin over the group's classes in part order (each
// class one per part while x[g][p] <= the group's classes).
//   1. Largest remainder first: the cells with a fractional share, the largest fraction first,
//      each taking what its group, the part and one extra per class allow.
//   2. What that leaves over is placed by augmenting paths (a maximum flow) over those cells,
//      so every cell ends within one row of its share whenever some rounding meeting the
//      totals does.
//   3. Where none does (rare: never with 2 parts, about 1 in 50,000 small random cases with 5
//      or 6), cells with an exact share may take an extra (one row over), and last a cell a
//      second one (under two rows over).
class StratifiedPlan {
 public:
  StratifiedPlan(const std::vector<int64_t>& class_rows, const std::vector<int64_t>& weights)
      : parts_(weights.size()), weights_(weights), rows_(class_rows) {
    total_ = std::accumulate(weights.begin(), weights.end(), int64_t{0});
    for (int64_t n : rows_) {
      if (n % total_ != 0) mod_.push_back(n % total_);
    }
    std::sort(mod_.begin(), mod_.end());
    mod_.erase(std::unique(mod_.begin(), mod_.end()), mod_.end());
    classes_.assign(mod_.size(), 0);
    group_of_.assign(rows_.size(), kNoGroup);
    index_.assign(rows_.size(), 0);
    need_ = apportion(std::accumulate(rows_.begin(), rows_.end(), int64_t{0}), weights_);
    for (size_t k = 0; k < rows_.size(); ++k) {
      for (size_t p = 0; p < parts_; ++p) need_[p] -= floor_of(rows_[k], p);
      if (rows_[k] % total_ == 0) continue;
      const auto g = static_cast<size_t>(
          std::lower_bound(mod_.begin(), mod_.end(), rows_[k] % total_) - mod_.begin());
      group_of_[k] = g;
      index_[k] = classes_[g]++;
    }
    x_.assign(mod_.size() * parts_, 0);
    supply_.assign(mod_.size(), 0);
    for (size_t g = 0; g < mod_.size(); ++g) supply_[g] = classes_[g] * extras_each(g);
    largest_remainder_first();
    while (augment(false)) {
    }
    while (augment(true)) {
    }
    for (size_t g = 0; g < mod_.size(); ++g) {
      for (size_t p = 0; p < parts_ && supply_[g] > 0; ++p)
        move(g, p, std::min(supply_[g], need_[p]));
    }
    for (size_t p = 0; p < parts_; ++p) HT_REQUIRE(need_[p] == 0, "stratified_parts: part totals");
  }

  // Rows of each part for class k.
  void counts(size_t k, std::vector<int64_t>& out) const {
    out.assign(parts_, 0);
    for (size_t p = 0; p < parts_; ++p) out[p] = floor_of(rows_[k], p);
    const size_t g = group_of_[k];
    if (g == kNoGroup) return;
    for (int64_t t = 0; t < extras_each(g); ++t) {  // items index_, index_ + classes, ...
      int64_t item = index_[k] + t * classes_[g];
      size_t p = 0;
      while (item >= x_[g * parts_ + p]) item -= x_[g * parts_ + p++];
      ++out[p];
    }
  }

 private:
  static constexpr size_t kNoGroup = SIZE_MAX, kUnseen = SIZE_MAX, kStart = SIZE_MAX - 1;

  // floor(n * w_p / W) without overflow (as apportion computes it).
  int64_t floor_of(int64_t n, size_t p) const {
    return n / total_ * weights_[p] + n % total_ * weights_[p] / total_;
  }
  // The fraction of group g's share of part p, times W.
  int64_t fraction(size_t g, size_t p) const { return mod_[g] * weights_[p] % total_; }
  int64_t extras_each(size_t g) const {
    int64_t floors = 0;
    for (size_t p = 0; p < parts_; ++p) floors += floor_of(mod_[g], p);
    return mod_[g] - floors;
  }
  // How many more of group g's classes may take an extra in part p (one each).
  int64_t room(size_t g, size_t p, bool any_cell) const {
    const int64_t cap = any_cell || fraction(g, p) > 0 ? classes_[g] : 0;
    return std::max<int64_t>(0, cap - x_[g * parts_ + p]);
  }
  void move(size_t g, size_t p, int64_t amount) {
    x_[g * parts_ + p] += amount;
    supply_[g] -= amount;
    need_[p] -= amount;
  }

  void largest_remainder_first() {
    std::vector<std::pair<int64_t, size_t>> cells;  // (-fraction, g * parts + p)
    for (size_t g = 0; g < mod_.size(); ++g) {
      for (size_t p = 0; p < parts_; ++p) {
        if (fraction(g, p) > 0) cells.emplace_back(-fraction(g, p), g * parts_ + p);
      }
    }
    std::sort(cells.begin(), cells.end());
    for (const auto& cell : cells) {
      const size_t g = cell.second / parts_, p = cell.second % parts_;
      move(g, p, std::min({room(g, p, false), supply_[g], need_[p]}));
    }
  }

  // One augmenting path, breadth first, from a group with extras left to a part that wants
  // some: group -> part where the group may take more extras there, part -> group where
  // the group has extras there that it can move on. Moves as many as the path carries.
  bool augment(bool any_cell) {
    const size_t groups = mod_.size();
    std::vector<size_t> prev(groups + parts_, kUnseen), queue;  // nodes: groups, then parts
    for (size_t g = 0; g < groups; ++g) {
      if (supply_[g] > 0) prev[g] = kStart, queue.push_back(g);
    }
    for (size_t i = 0; i < queue.size(); ++i) {
      const size_t u = queue[i];
      for (size_t v = 0; v < (u < groups ? parts_ : groups); ++v) {
        const size_t node = u < groups ? groups + v : v;
        const int64_t cap = u < groups ? room(u, v, any_cell) : x_[v * parts_ + (u - groups)];
        if (prev[node] != kUnseen || cap == 0) continue;
        prev[node] = u;
        queue.push_back(node);
        if (u < groups && need_[v] > 0) {
          push_along(prev, node, any_cell);
          return true;
        }
      }
    }
    return false;
  }

  void push_along(const std::vector<size_t>& prev, size_t end, bool any_cell) {
    const size_t groups = mod_.size();
    int64_t amount = need_[end - groups];
    size_t to = end;
    for (; prev[to] != kStart; to = prev[to]) {
      const size_t from = prev[to];
      amount = std::min(amount, from < groups ? room(from, to - groups, any_cell)
                                              : x_[to * parts_ + (from - groups)]);
    }
    amount = std::min(amount, supply_[to]);
    supply_[to] -= amount;
    need_[end - groups] -= amount;
    for (to = end; prev[to] != kStart; to = prev[to]) {
      const size_t from = prev[to];
      if (from < groups) {
        x_[from * parts_ + (to - groups)] += amount;  // the group takes more extras there
      } else {
        x_[to * parts_ + (from - groups)] -= amount;  // ... having moved these on
      }
    }
  }

  size_t parts_;
  std::vector<int64_t> weights_, rows_;
  int64_t total_ = 0;
  std::vector<int64_t> mod_;      // per group: n_k mod W of its classes
  std::vector<int64_t> classes_;  // per group: how many classes
  std::vector<size_t> group_of_;  // per class (kNoGroup: no extras)
  std::vector<int64_t> index_;    // per class: its place in its group
  std::vector<int64_t> x_;        // [g * parts + p]: extras of group g in part p
  std::vector<int64_t> supply_;   // per group: extras not yet placed
  std::vector<int64_t> need_;     // per part: extras still wanted
};

// True if `source` ends with split's own record of making a part named `name` (the source of
// every part it writes ends so: "part 'NAME' of a split of IN by hpctrain-data (weights ...,
// stratified by class, seed S)"); a file made from a part (a shard of it) has more after it.
bool ends_as_split_part(const std::string& source, const std::string& name) {
  const std::string tail = ", stratified by class, seed ";
  const size_t t = source.rfind(tail);
  if (t == std::string::npos || source.back() != ')') return false;
  const std::string seed = source.substr(t + tail.size(), source.size() - t - tail.size() - 1);
  if (seed.empty() || seed.find_first_not_of("0123456789") != std::string::npos) return false;
  const size_t h = source.rfind("part '" + name + "' of a split of ", t);
  if (h == std::string::npos || (h != 0 && (h < 2 || source.compare(h - 2, 2, "; ") != 0))) {
    return false;
  }
  return source.find(" by hpctrain-data (weights ", h) < t;
}

bool plain_name(const std::string& n) {
  return !n.empty() && n.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                           "0123456789_-") == std::string::npos;
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
    if (!plain_name(n)) {
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
  // 2. The counts of every (class, part) cell, for all classes together.
  std::vector<int64_t> class_rows(rows_of.size());
  for (size_t k = 0; k < rows_of.size(); ++k)
    class_rows[k] = static_cast<int64_t>(rows_of[k].size());
  const StratifiedPlan plan(class_rows, weights);
  // 3. Per class: permute (Fisher-Yates, its own seeded stream), then deal out the counts.
  std::vector<uint8_t> part(labels.size(), 0);
  std::vector<int64_t> counts;
  for (size_t k = 0; k < rows_of.size(); ++k) {
    std::vector<int64_t>& rows = rows_of[k];
    Rng rng(mix_seed(seed, k, kSplitStream));
    for (size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[rng.uniform_int(i)]);
    plan.counts(k, counts);
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
  // The parts of an earlier split under this prefix that this one does not write go with the
  // set they belonged to: each part's source attribute records its name and how it was made.
  const std::vector<std::string> earlier = earlier_set_files(
      out_prefix, report.paths, input, "a part of an earlier split",
      [](const std::string& middle, const std::string& path) {
        try {
          return plain_name(middle) && ends_as_split_part(read_source_attribute(path), middle);
        } catch (const std::exception&) {
          return false;  // not a data file split could have written
        }
      });
  const DatasetFile src(input);
  require_images(src);
  const DatasetShape& shape = src.shape();
  // Part totals are apportion(n, weights) (stratified_parts keeps them): none may be 0.
  const std::vector<int64_t> totals = apportion(shape.n, options.weights);
  for (size_t p = 0; p < parts; ++p) {
    if (totals[p] == 0) {
      throw UsageError(input + ": --ratios " + join(options.weights, ",") + ": part '" +
                       options.names[p] + "' would be empty (" + std::to_string(shape.n) +
                       " rows are too few for weight " + std::to_string(options.weights[p]) +
                       " of " +
                       std::to_string(std::accumulate(options.weights.begin(),
                                                      options.weights.end(), int64_t{0})) +
                       ")");
    }
  }

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
  HT_REQUIRE(report.rows == totals, "split_data_file: part totals");
  labels = {};

  // 2. One pass over the rows into one writer per part.
  std::vector<std::unique_ptr<DatasetWriter>> writers;
  std::vector<DatasetWriter*> targets;
  for (size_t p = 0; p < parts; ++p) {
    const std::string how = "part '" + options.names[p] + "' of a split of " + input +
                            " by hpctrain-data (weights " + join(options.weights, ":") + " for " +
                            join(options.names, ":") + ", stratified by class, seed " +
                            std::to_string(options.seed) + ")";
    writers.push_back(std::make_unique<DatasetWriter>(
        report.paths[p], derived_writer_options(src, how, options.deflate_level)));
    targets.push_back(writers.back().get());
  }
  route_rows(src, part, targets);
  commit_together(targets, earlier);
  return report;
}

}  // namespace hpctrain
