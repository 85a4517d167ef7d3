// Text into token windows: tokenise each file, count, build the vocabulary, renumber the
// stream and write the windows. The stream is held as int32 ids (4 bytes per token); a
// file's text while it is tokenised; tokens are views into it, copied once per distinct
// token; windows are written a block of rows at a time.
#include "data-tools/text_tokens.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/utf8.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/row_copy.hpp"
#include "h5/h5.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUnknown = "<unk>";
constexpr size_t kMaxVocabulary = size_t{1} << 24;  // the readers' limit (docs/formats.md)

bool word_char(unsigned char c) { return c >= 0x80 || std::isalnum(c) != 0 || c == '\''; }

// Calls `token` with each token of `text` at `level`, a view into `text` (split_tokens).
void for_each_token(const std::string& text, const std::string& level, const std::string& what,
                    const std::function<void(std::string_view)>& token) {
  const bool words = level == "word";
  size_t word = std::string::npos;  // where the current word starts
  // A UTF-8 byte-order mark (an editor's on Windows) is no token, nor part of the first word.
  for (size_t i = std::string_view(text).starts_with("\xEF\xBB\xBF") ? 3 : 0; i < text.size();) {
    const size_t n = utf8_sequence(text, i);
    if (n == 0) {
      throw UsageError(what +
                       (text[i] == '\0' ? ": NUL byte at byte " : ": invalid UTF-8 at byte ") +
                       std::to_string(i) +
                       (text[i] == '\0' ? " (not a text file?)"
                                        : " (convert the text to UTF-8 first, e.g. with iconv)"));
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (!words) {
      token(std::string_view(text).substr(i, n));
    } else if (word_char(c)) {
      if (word == std::string::npos) word = i;
    } else {
      if (word != std::string::npos) token(std::string_view(text).substr(word, i - word));
      word = std::string::npos;
      if (c == '\n' || std::isspace(c) == 0) token(std::string_view(text).substr(i, n));
    }
    i += n;
  }
  if (word != std::string::npos) token(std::string_view(text).substr(word));
}

// std::string keys looked up by std::string_view, without a copy.
struct ViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view v) const { return std::hash<std::string_view>{}(v); }
};

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError(path + ": no such file");
  if (fs::is_directory(path, ec)) throw UsageError(path + ": is a directory, not a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes the windows `rows` (their first tokens' indices / T) of `ids` for `path` into a
// temporary file, removed if anything fails; returns it, for the caller to commit.
OwnedTemporary write_windows(const std::string& path, const std::vector<int32_t>& ids,
                             const std::vector<int64_t>& rows, const TextOptions& o,
                             const std::vector<std::string>& vocabulary,
                             const std::string& source) {
  OwnedTemporary temp(path + ".tmp", path);
  try {
    h5_quiet();
    const H5Handle fapl = h5_large_attribute_access();  // the vocabulary may be large
    const H5Handle fcpl = h5_untimed_creation();        // nor in the root group's header
    H5Handle file(HT_CHECK_H5(H5Fcreate(temp.path().c_str(), H5F_ACC_EXCL, fcpl.get(), fapl.get())),
                  H5Fclose);
    temp.own(h5_descriptor(file.get()));
    const int64_t width = o.seq_len + 1;
    const hsize_t dims[2] = {rows.size(), static_cast<hsize_t>(width)};
    H5Handle space(HT_CHECK_H5(H5Screate_simple(2, dims, nullptr)), H5Sclose);
    // No modification time in the object header: the same options write the same bytes.
    H5Handle dcpl(HT_CHECK_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
    HT_CHECK_H5(H5Pset_obj_track_times(dcpl.get(), false));
    H5Handle set(HT_CHECK_H5(H5Dcreate2(file.get(), "tokens", H5T_STD_I32LE, space.get(),
                                        H5P_DEFAULT, dcpl.get(), H5P_DEFAULT)),
                 H5Dclose);
    // A block of windows at a time (about 4 MiB), not a second copy of the stream.
    const size_t per_block = std::max<size_t>(1, (size_t{1} << 20) / static_cast<size_t>(width));
    std::vector<int32_t> block;
    for (size_t first = 0; first < rows.size(); first += per_block) {
      const size_t count = std::min(per_block, rows.size() - first);
      block.resize(count * static_cast<size_t>(width));
      for (size_t r = 0; r < count; ++r) {
        std::copy_n(ids.begin() + rows[first + r] * o.seq_len, width,
                    block.begin() + static_cast<std::ptrdiff_t>(r * width));
      }
      const hsize_t start[2] = {first, 0}, size[2] = {count, static_cast<hsize_t>(width)};
      HT_CHECK_H5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, size, nullptr));
      H5Handle memory(HT_CHECK_H5(H5Screate_simple(2, size, nullptr)), H5Sclose);
      HT_CHECK_H5(H5Dwrite(set.get(), H5T_NATIVE_INT32, memory.get(), space.get(), H5P_DEFAULT,
                           block.data()));
    }
    h5_write_int(file.get(), "vocab_size", static_cast<int64_t>(vocabulary.size()));
    h5_write_int(file.get(), "seq_len", o.seq_len);
    h5_write_strings(file.get(), "vocabulary", vocabulary, false);
    h5_write_strings(file.get(), "level", {o.level}, true);
    h5_write_strings(file.get(), "source", {source}, true);
    HT_CHECK_H5(H5Fflush(file.get(), H5F_SCOPE_GLOBAL));
  } catch (const Error& e) {  // the temporary file removed as it goes
    throw Error(path + ": cannot write: " + e.what());
  }
  return temp;
}

// Exit 2 before any work for a split's --out that cannot be written: a file where the
// directory goes, a directory where a split goes, no writable directory to make it in.
void check_split_directory(const std::string& out) {
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    throw UsageError(out +
                     ": not a directory (with a fraction, --out names the directory "
                     "for train.h5, val.h5, test.h5)");
  }
  for (const char* name : {"train.h5", "val.h5", "test.h5"}) {
    const std::string file = (fs::path(out) / name).string();
    if (fs::is_directory(file, ec)) {
      throw UsageError(file + ": is a directory, where a split goes");
    }
  }
  // The directory that must exist and be writable: OUT itself where it is one, else the
  // nearest existing one above it (OUT is made with its parents).
  fs::path parent = fs::absolute(out, ec);
  if (!fs::is_directory(st)) parent = parent.parent_path();
  while (!fs::exists(parent, ec) && parent != parent.root_path()) {
    parent = parent.parent_path();
  }
  if (!fs::is_directory(parent, ec)) {
    throw UsageError(out + (fs::exists(parent, ec)
                                ? ": " + parent.string() + " is not a directory"
                                : ": directory " + parent.string() + " does not exist"));
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    throw UsageError(out + ": directory " + parent.string() + " is not writable");
  }
}

// Whether `path` is a regular file that this command wrote (its `source` attribute), which a
// new split that does not write it removes; any other file there is the user's, and stays.
bool written_by_text(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) return false;
  try {
    return read_source_attribute(path).rfind("hpctrain-data text ", 0) == 0;
  } catch (const std::exception&) {
    return false;  // not a data file
  }
}

}  // namespace

std::vector<std::string> split_tokens(const std::string& text, const std::string& level,
                                      const std::string& what) {
  std::vector<std::string> tokens;
  for_each_token(text, level, what, [&](std::string_view t) { tokens.emplace_back(t); });
  return tokens;
}

TextReport convert_text(const TextOptions& o) {
  if (o.files.empty()) throw UsageError("text: no input files given");
  if (o.seq_len < 1) throw UsageError("text: --seq-len must be at least 1");
  if (o.level != "char" && o.level != "word") {
    throw UsageError("text: --level: expected char or word, got '" + o.level + "'");
  }
  if (o.vocab_size == 1 || o.vocab_size < 0) {
    throw UsageError("text: --vocab-size must be at least 2 (or 0: every token)");
  }
  const bool split = o.val_fraction > 0 || o.test_fraction > 0;
  if (o.val_fraction < 0 || o.test_fraction < 0 || o.val_fraction + o.test_fraction >= 1) {
    throw UsageError("text: --val-fraction and --test-fraction must be >= 0 with a sum below 1");
  }
  const char* names[3] = {"train.h5", "val.h5", "test.h5"};
  std::vector<std::string> outputs = {o.out};
  for (const char* name : names) outputs.push_back((fs::path(o.out) / name).string());
  for (const std::string& f : o.files) check_outputs_differ(f, outputs);
  if (split) {
    check_split_directory(o.out);
  } else {
    check_output_file(o.out);
  }

  // 1. Tokens as provisional ids (order of first appearance), with their counts.
  std::unordered_map<std::string, int32_t, ViewHash, std::equal_to<>> provisional;
  std::vector<std::string> seen;
  std::vector<int64_t> counts;
  std::vector<int32_t> ids;
  for (const std::string& path : o.files) {
    const std::string text = read_file(path);
    if (text.empty()) throw UsageError(path + ": empty file");
    for_each_token(text, o.level, path, [&](std::string_view t) {
      auto it = provisional.find(t);
      if (it == provisional.end()) {
        it = provisional.emplace(std::string(t), static_cast<int32_t>(seen.size())).first;
        seen.emplace_back(t);
        counts.push_back(0);
      }
      ++counts[static_cast<size_t>(it->second)];
      ids.push_back(it->second);
    });
  }
  const int64_t windows = (static_cast<int64_t>(ids.size()) - 1) / o.seq_len;
  if (windows < 1) {
    throw UsageError(
        "text: " + (o.files.size() == 1 ? o.files[0] : std::to_string(o.files.size()) + " files") +
        ": " + std::to_string(ids.size()) + " tokens make no window of " +
        std::to_string(o.seq_len + 1) + " (--seq-len " + std::to_string(o.seq_len) + " + 1)");
  }

  // 2. The vocabulary: every token sorted (characters by code point, which UTF-8 byte order
  // is; words by string); with a size, <unk> and the V - 1 most frequent (ties by string),
  // or all of them where there are fewer.
  std::vector<int32_t> order(seen.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  const bool limited = o.vocab_size > 0;
  if (limited && static_cast<int64_t>(seen.size()) >= o.vocab_size) {
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return counts[a] != counts[b] ? counts[a] > counts[b] : seen[a] < seen[b];
    });
    order.resize(static_cast<size_t>(o.vocab_size - 1));
  }
  if (order.size() + (limited ? 1 : 0) > kMaxVocabulary) {
    throw UsageError("text: " + std::to_string(order.size()) + " distinct tokens, more than " +
                     "the 2^24 a vocabulary may hold (ids reach the model as float values): " +
                     "give --vocab-size");
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return seen[a] < seen[b]; });
  std::vector<std::string> vocabulary;
  if (limited) vocabulary.push_back(kUnknown);
  std::vector<int32_t> final_id(seen.size(), 0);  // 0 is <unk> when limited
  for (int32_t p : order) {
    final_id[static_cast<size_t>(p)] = static_cast<int32_t>(vocabulary.size());
    vocabulary.push_back(seen[static_cast<size_t>(p)]);
  }
  for (int32_t& id : ids) id = final_id[static_cast<size_t>(id)];

  // 3. Windows into the splits: window i goes to test when frac(i g) < test_fraction, to val
  // when below test_fraction + val_fraction (g the golden ratio's fraction: evenly spread
  // over the whole text, whatever the fractions).
  std::vector<int64_t> rows[3];
  for (int64_t i = 0; i < windows; ++i) {
    const double u = std::fmod(static_cast<double>(i) * 0.6180339887498949, 1.0);
    const int k = u < o.test_fraction ? 2 : u < o.test_fraction + o.val_fraction ? 1 : 0;
    rows[split ? k : 0].push_back(i);
  }
  std::string source =
      "hpctrain-data text --level " + o.level + " --seq-len " + std::to_string(o.seq_len) + ":";
  for (const std::string& f : o.files) {
    source += ' ';
    source += fs::path(f).filename().string();
  }
  TextReport report;
  report.tokens = static_cast<int64_t>(ids.size());
  report.vocab = static_cast<int64_t>(vocabulary.size());
  if (!split) {
    write_windows(o.out, ids, rows[0], o, vocabulary, source).commit();
    report.outputs = {o.out};
    report.windows = {windows};
    return report;
  }
  const bool wanted[3] = {true, o.val_fraction > 0, o.test_fraction > 0};
  for (int k = 0; k < 3; ++k) {
    if (wanted[k] && rows[k].empty()) {
      throw UsageError(std::string("text: the ") +
                       (k == 0   ? "training"
                        : k == 1 ? "val"
                                 : "test") +
                       " split gets no window of the " + std::to_string(windows) +
                       ": change the fractions or give more text");
    }
  }
  make_directories(o.out);
  // All written before any is renamed, the earlier files removed in between (those of an
  // earlier split that this run does not write too): a failure or a kill never leaves new
  // splits beside old ones of other windows or another vocabulary.
  std::vector<OwnedTemporary> temps;  // removed if anything fails before their renames
  std::vector<std::string> all;
  for (int k = 0; k < 3; ++k) {
    const std::string path = (fs::path(o.out) / names[k]).string();
    if (!wanted[k]) {
      if (written_by_text(path)) {
        all.push_back(path);
      } else if (std::error_code ec; fs::exists(fs::symlink_status(path, ec))) {
        report.kept.push_back(path);
      }
      continue;
    }
    all.push_back(path);
    temps.push_back(write_windows(path, ids, rows[k], o, vocabulary, source));
    report.outputs.push_back(path);
    report.windows.push_back(static_cast<int64_t>(rows[k].size()));
  }
  remove_files(all);
  // On a failure the temporaries not yet renamed are removed (by their destructors).
  for (OwnedTemporary& temp : temps) temp.commit();
  return report;
}

}  // namespace hpctrain
