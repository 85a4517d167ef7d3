// Stratified split of a data file into parts (train/val/test): each class is divided by
// the same weights with a seeded permutation (hpctrain::Rng, so the same on every
// platform), and the rows are streamed into PREFIX-NAME.h5 in bounded memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

struct SplitOptions {
  std::vector<int64_t> weights;    // one per part, each in [1, 1000000]; need not add to 100
  std::vector<std::string> names;  // one per part: the files are PREFIX-NAME.h5
  uint64_t seed = 0;
  int deflate_level = 0;
};

// "85,2,13" -> {85, 2, 13}: 2 to 16 integers in [1, 1000000]. `what` names the option.
std::vector<int64_t> parse_split_weights(const std::string& text, const std::string& what);

// "train,val,test" -> names: as many as `parts`, distinct, non-empty, letters, digits, '_'
// or '-' only (they become part of file names).
std::vector<std::string> parse_split_names(const std::string& text, size_t parts,
                                           const std::string& what);

// The names used when none are given: {train, test} for 2 parts, {train, val, test} for
// 3, else part0, part1, ...
std::vector<std::string> default_split_names(size_t parts);

// PREFIX-NAME.h5
std::string split_output_path(const std::string& prefix, const std::string& name);

// The part of each row. How many rows of each class go to each part is decided for all
// classes together: part p gets apportion(n, weights)[p] rows in all, and each class is
// divided as close to the weights as those totals allow (within one row of its share where
// any division meeting them is; split.cpp, StratifiedPlan). Then each class's rows (in row
// order) are permuted with an Rng seeded from (seed, class) and the first counts[0] go to
// part 0, the next to part 1, and so on. labels must lie in [0, num_classes).
std::vector<uint8_t> stratified_parts(const std::vector<int32_t>& labels, int num_classes,
                                      const std::vector<int64_t>& weights, uint64_t seed);

struct SplitReport {
  std::vector<std::string> paths;               // one per part
  std::vector<int64_t> rows;                    // rows per part
  std::vector<std::vector<int64_t>> per_class;  // [part][class] rows
};

// Splits `input` into one file per part (rows keep their source order within a part; the
// sample type, shape, class names and source attribute carry over, the source extended by
// how the part was made). The parts of an earlier split under the same prefix that this one
// does not write (PREFIX-NAME.h5 whose source attribute ends with split's record of making
// part NAME) are removed with the files it replaces, before the new ones are renamed.
// Throws UsageError if a part would be empty (naming --ratios), if an output is the input,
// or if the input is one of the earlier parts.
SplitReport split_data_file(const std::string& input, const std::string& out_prefix,
                            const SplitOptions& options);

}  // namespace hpctrain
