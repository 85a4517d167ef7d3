// A data set in several files (the shards `hpctrain-data shard` writes, or any files of
// the same kind): read as one, the rows of the first file, then the second's, and so on,
// so that a rank's shard and a batch may span a file boundary. The config names them as a
// list of paths and globs (data.train, data.val, data.test).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset_file.hpp"

namespace hpctrain {

// The files of a config entry list, in order: a path is kept as it is; a glob (with *, ?
// or [) is replaced by its matches in byte order. Throws UsageError "`where`: PATH: no such
// file", "`where`: 'PATTERN' matches no file", or "`where`: PATH is listed twice (...)" for
// one file reached twice (by two names, or a path and a glob: its rows would count twice).
// `where` names the key ("CONFIG: data.train").
std::vector<std::string> expand_data_paths(const std::vector<std::string>& entries,
                                           const std::string& where);

// The first file of `a` that is also one of `b` (the same file, by any name), or "".
std::string shared_data_file(const std::vector<std::string>& a, const std::vector<std::string>& b);

// Throws UsageError naming `path` and data.`key` unless a validation or test set of shape
// `s` goes with training set `train`: the same sample shape and kind of data (tokens,
// vocabulary), at most its classes, and where both name their classes, the same name for
// each label (a val file converted from a folder without one class numbers the others on).
void check_like_training(const DatasetShape& s, const DatasetShape& train, const std::string& path,
                         const std::string& key);

class DatasetFiles final : public DataSource {
 public:
  // Opens every file (two or more); throws UsageError naming the first whose samples,
  // element type, classes or vocabulary differ from the first file's.
  explicit DatasetFiles(const std::vector<std::string>& paths,
                        StoredStats stats = StoredStats::kRead);

  const std::string& path() const override { return name_; }
  const DatasetShape& shape() const override { return shape_; }
  void read_rows(int64_t start, int64_t count, void* images, int32_t* labels) const override;
  void read_labels(int64_t start, int64_t count, int32_t* labels) const override;
  void read_row_set(const int64_t* rows, int64_t count, void* images,
                    int32_t* labels) const override;

 private:
  // The file holding global row `row`.
  size_t part_of(int64_t row) const;
  // Calls read(part, local_start, count, done) for each file's piece of rows
  // [start, start + count); `done` counts the rows before the piece.
  template <typename Read>
  void for_each_piece(int64_t start, int64_t count, Read read) const;

  std::vector<std::unique_ptr<DatasetFile>> parts_;
  std::vector<int64_t> first_row_;  // global index of each part's row 0; then the total
  std::string name_;
  DatasetShape shape_;
};

// One file as a DatasetFile, several as DatasetFiles; null for none.
std::unique_ptr<DataSource> open_data(const std::vector<std::string>& paths,
                                      StoredStats stats = StoredStats::kRead);

}  // namespace hpctrain
