#include "data/dataset_files.hpp"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "core/error.hpp"

namespace hpctrain {
namespace {

std::string sample_text(const DatasetShape& s) {
  return std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) + " " +
         to_string(s.type);
}

// What `s` and `first` disagree on, or "" when they are parts of one data set.
std::string difference(const DatasetShape& s, const DatasetShape& first) {
  if (s.c != first.c || s.h != first.h || s.w != first.w || s.type != first.type ||
      s.labels_per_sample != first.labels_per_sample) {
    return "samples are " + sample_text(s) + (s.labels_per_sample > 1 ? " (next tokens)" : "") +
           ", the first file's " + sample_text(first) +
           (first.labels_per_sample > 1 ? " (next tokens)" : "");
  }
  if (s.num_classes != first.num_classes || s.class_names != first.class_names) {
    return std::to_string(s.num_classes) + " classes" +
           (s.class_names != first.class_names ? " (other class_names)" : "") +
           ", the first file " + std::to_string(first.num_classes);
  }
  if (s.vocab_size != first.vocab_size || s.vocabulary != first.vocabulary ||
      s.level != first.level) {
    return "another vocabulary (vocab_size " + std::to_string(s.vocab_size) + ", the first file " +
           std::to_string(first.vocab_size) + ")";
  }
  return "";
}

// "images", "token classification, vocab_size V" or "next tokens, vocab_size V".
std::string data_kind(const DatasetShape& s) {
  if (!s.tokens()) return "images";
  return std::string(s.labels_per_sample > 1 ? "next tokens" : "token classification") +
         ", vocab_size " + std::to_string(s.vocab_size);
}

}  // namespace

std::vector<std::string> expand_data_paths(const std::vector<std::string>& entries,
                                           const std::string& where) {
  std::vector<std::string> out;
  for (const std::string& e : entries) {
    std::error_code exists_ec;  // a file named with a glob's characters ("fold[1].h5") is it
    if (e.find_first_of("*?[") == std::string::npos || std::filesystem::exists(e, exists_ec)) {
      // A missing file is named with its key; one that does not open, by DatasetFile.
      std::error_code ec;
      if (!std::filesystem::exists(e, ec) && !ec) {
        throw UsageError(where + ": " + e + ": no such file");
      }
      out.push_back(e);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(e.c_str(), GLOB_NOSORT, nullptr, &g);
    std::vector<std::string> matches;
    if (rc == 0) matches.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    ::globfree(&g);
    if (matches.empty()) throw UsageError(where + ": '" + e + "' matches no file");
    std::sort(matches.begin(), matches.end());  // byte order, whatever the locale
    out.insert(out.end(), matches.begin(), matches.end());
  }
  std::map<std::pair<dev_t, ino_t>, std::string> seen;  // by identity, whatever the name
  for (const std::string& path : out) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;  // DatasetFile names what is wrong
    const auto [it, fresh] = seen.emplace(std::make_pair(st.st_dev, st.st_ino), path);
    if (!fresh) {
      throw UsageError(where + ": " + path + " is listed twice" +
                       (it->second == path ? std::string() : " (also as " + it->second + ")") +
                       ": its rows would count twice");
    }
  }
  return out;
}

std::string shared_data_file(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::set<std::pair<dev_t, ino_t>> in_b;
  for (const std::string& y : b) {
    struct stat st {};
    if (::stat(y.c_str(), &st) == 0) in_b.emplace(st.st_dev, st.st_ino);
  }
  for (const std::string& x : a) {
    struct stat st {};
    if (::stat(x.c_str(), &st) == 0 && in_b.count({st.st_dev, st.st_ino}) > 0) return x;
  }
  return "";
}

void check_like_training(const DatasetShape& s, const DatasetShape& train, const std::string& path,
                         const std::string& key) {
  if (s.c != train.c || s.h != train.h || s.w != train.w) {
    throw UsageError(path + ": data." + key + " samples are " + std::to_string(s.c) + "x" +
                     std::to_string(s.h) + "x" + std::to_string(s.w) +
                     ", but data.train samples are " + std::to_string(train.c) + "x" +
                     std::to_string(train.h) + "x" + std::to_string(train.w));
  }
  if (s.tokens() != train.tokens() || s.vocab_size != train.vocab_size ||
      s.labels_per_sample != train.labels_per_sample) {
    throw UsageError(path + ": data." + key + " is not the same kind of data as data.train (" +
                     data_kind(s) + " against " + data_kind(train) + ")");
  }
  // The same kind and size, other tokens (two hpctrain-data text runs): both vocabularies
  // have vocab_size entries.
  if (!s.vocabulary.empty() && !train.vocabulary.empty() && s.vocabulary != train.vocabulary) {
    size_t i = 0;
    while (s.vocabulary[i] == train.vocabulary[i]) ++i;
    throw UsageError(path + ": data." + key + " has another vocabulary than data.train, of the " +
                     "same size (id " + std::to_string(i) + " is '" + s.vocabulary[i] +
                     "' against '" + train.vocabulary[i] +
                     "'): make both in one hpctrain-data text run");
  }
  if (s.num_classes > train.num_classes) {
    throw UsageError(path + ": data." + key + " has " + std::to_string(s.num_classes) +
                     " classes, more than data.train's " + std::to_string(train.num_classes));
  }
  if (!s.class_names.empty() && !train.class_names.empty()) {
    for (size_t k = 0; k < s.class_names.size(); ++k) {
      if (s.class_names[k] != train.class_names[k]) {
        throw UsageError(path + ": data." + key + " label " + std::to_string(k) + " is '" +
                         s.class_names[k] + "', but data.train's label " + std::to_string(k) +
                         " is '" + train.class_names[k] +
                         "' (class_names must agree label for label)");
      }
    }
  }
}

DatasetFiles::DatasetFiles(const std::vector<std::string>& paths, StoredStats stats) {
  HT_REQUIRE(paths.size() >= 2, "DatasetFiles: fewer than two files");
  int64_t rows = 0;
  for (const std::string& p : paths) {
    parts_.push_back(std::make_unique<DatasetFile>(p, stats));
    const DatasetShape& s = parts_.back()->shape();
    if (parts_.size() > 1) {
      const std::string diff = difference(s, parts_.front()->shape());
      if (!diff.empty()) {
        throw UsageError(p + ": not part of the same data set as " + paths.front() + ": " + diff);
      }
    }
    first_row_.push_back(rows);
    rows += s.n;
  }
  first_row_.push_back(rows);
  shape_ = parts_.front()->shape();
  shape_.n = rows;
  name_ = paths.front() + " and " + std::to_string(paths.size() - 1) + " more file" +
          (paths.size() > 2 ? "s" : "");
}

size_t DatasetFiles::part_of(int64_t row) const {
  // The last part whose first row is <= row.
  const auto it = std::upper_bound(first_row_.begin(), first_row_.end() - 1, row);
  return static_cast<size_t>(it - first_row_.begin()) - 1;
}

template <typename Read>
void DatasetFiles::for_each_piece(int64_t start, int64_t count, Read read) const {
  HT_REQUIRE(start >= 0 && count >= 0 && start <= shape_.n && count <= shape_.n - start,
             name_ + ": rows [" + std::to_string(start) + ", " + std::to_string(start + count) +
                 ") outside [0, " + std::to_string(shape_.n) + ")");
  int64_t done = 0;
  while (done < count) {
    const int64_t row = start + done;
    const size_t p = part_of(row);
    const int64_t n = std::min(count - done, first_row_[p + 1] - row);
    read(*parts_[p], row - first_row_[p], n, done);
    done += n;
  }
}

void DatasetFiles::read_rows(int64_t start, int64_t count, void* images, int32_t* labels) const {
  auto* out = static_cast<uint8_t*>(images);
  const size_t per_sample = static_cast<size_t>(shape_.labels_per_sample);
  for_each_piece(start, count, [&](const DatasetFile& f, int64_t local, int64_t n, int64_t done) {
    f.read_rows(local, n, out + static_cast<size_t>(done) * shape_.sample_bytes(),
                labels + static_cast<size_t>(done) * per_sample);
  });
}

void DatasetFiles::read_labels(int64_t start, int64_t count, int32_t* labels) const {
  const size_t per_sample = static_cast<size_t>(shape_.labels_per_sample);
  for_each_piece(start, count, [&](const DatasetFile& f, int64_t local, int64_t n, int64_t done) {
    f.read_labels(local, n, labels + static_cast<size_t>(done) * per_sample);
  });
}

void DatasetFiles::read_row_set(const int64_t* rows, int64_t count, void* images,
                                int32_t* labels) const {
  if (count == 0) return;
  HT_REQUIRE(rows[0] >= 0 && rows[count - 1] < shape_.n, name_ + ": a row outside the data set");
  auto* out = static_cast<uint8_t*>(images);
  const size_t per_sample = static_cast<size_t>(shape_.labels_per_sample);
  // The rows of one file at a time, renumbered from its first row (the reader threads call
  // this for every batch: the renumbered rows reuse one buffer per thread).
  thread_local std::vector<int64_t> local;
  for (int64_t i = 0; i < count;) {
    const size_t p = part_of(rows[i]);
    int64_t j = i;
    local.clear();
    while (j < count && rows[j] < first_row_[p + 1]) local.push_back(rows[j++] - first_row_[p]);
    parts_[p]->read_row_set(local.data(), j - i,
                            out + static_cast<size_t>(i) * shape_.sample_bytes(),
                            labels + static_cast<size_t>(i) * per_sample);
    i = j;
  }
}

std::unique_ptr<DataSource> open_data(const std::vector<std::string>& paths, StoredStats stats) {
  if (paths.empty()) return nullptr;
  if (paths.size() == 1) return std::make_unique<DatasetFile>(paths.front(), stats);
  return std::make_unique<DatasetFiles>(paths, stats);
}

}  // namespace hpctrain
