// IDX reading (header: two zero bytes, a type code, the rank, then rank big-endian uint32
// sizes; then the items) and the IDX -> data file conversion used by hpctrain-data.
#include "data-tools/idx.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/progress_note.hpp"
#include "data-tools/sample_codec.hpp"

namespace hpctrain {
namespace {

constexpr uint8_t kTypeUnsignedByte = 0x08;
// Rows converted per append: bounded memory (about 800 KB of MNIST images per writer).
// gzread takes an unsigned int count; read in pieces well below that.
constexpr size_t kMaxGzRead = size_t{1} << 30;

}  // namespace

IdxReader::IdxReader(const std::string& path, int expected_rank) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw UsageError(path + ": no such file");
  if (std::filesystem::is_directory(path, ec)) throw UsageError(path + ": is a directory");
  file_.reset(gzopen(path.c_str(), "rb"));
  if (!file_) throw UsageError(path + ": cannot open for reading");
  gzbuffer(file_.get(), 256 * 1024);  // fewer, larger reads of the compressed stream

  uint8_t magic[4];
  if (read_up_to(magic, 4) < 4) throw UsageError(path + ": truncated: no complete IDX header");
  if (magic[0] != 0 || magic[1] != 0) {
    throw UsageError(path + ": not an IDX file (bad magic number)");
  }
  if (magic[2] != kTypeUnsignedByte) {
    char code[8];
    std::snprintf(code, sizeof(code), "0x%02x", magic[2]);
    throw UsageError(path + ": IDX element type " + code +
                     " is not supported, expected 0x08 (unsigned byte)");
  }
  if (magic[3] != expected_rank) {
    throw UsageError(path + ": IDX file has " + std::to_string(magic[3]) +
                     " dimensions, expected " + std::to_string(expected_rank) +
                     (expected_rank == 3 ? " (images [N, H, W])" : " (labels [N])"));
  }
  for (int d = 0; d < expected_rank; ++d) {
    uint8_t be[4];
    if (read_up_to(be, 4) < 4) throw UsageError(path + ": truncated: no complete IDX header");
    const int64_t size =
        (int64_t{be[0]} << 24) | (int64_t{be[1]} << 16) | (int64_t{be[2]} << 8) | int64_t{be[3]};
    if (size == 0) throw UsageError(path + ": IDX dimension " + std::to_string(d) + " is zero");
    // An image's sides as the other converters take them; the count may be any 32-bit size.
    if (d > 0 && size > 65536) {
      throw UsageError(path + ": IDX dimension " + std::to_string(d) + " is " +
                       std::to_string(size) + ", above the limit of 65536");
    }
    dims_.push_back(size);
    if (d > 0) item_bytes_ *= size;
  }
  if (expected_rank == 3) check_sample_bytes(item_bytes_, SampleType::kU8, path);
}

size_t IdxReader::read_up_to(void* dst, size_t bytes) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t total = 0;
  while (total < bytes) {
    const auto piece = static_cast<unsigned>(std::min(bytes - total, kMaxGzRead));
    const int got = gzread(file_.get(), out + total, piece);
    if (got < 0) {  // corrupt compressed data or an I/O error, not a short file
      int code = 0;
      throw UsageError(path_ + ": cannot read: " + gzerror(file_.get(), &code));
    }
    if (got == 0) {
      // The end of the file; zlib ends a gzip stream cut short this way too, and says so.
      int code = 0;
      gzerror(file_.get(), &code);
      cut_short_ = code == Z_BUF_ERROR;
      break;
    }
    total += static_cast<size_t>(got);
  }
  return total;
}

void IdxReader::read(int64_t count, uint8_t* dst) {
  HT_REQUIRE(count >= 0 && count <= items() - next_item_, path_ + ": read past the last item");
  const auto bytes = static_cast<size_t>(count * item_bytes_);
  const size_t got = read_up_to(dst, bytes);
  if (got < bytes) {
    // How far the data goes is what tells a cut-off download from a wrong header.
    throw UsageError(path_ + ": truncated: the header declares " + std::to_string(items()) +
                     " items but the data ends after " +
                     std::to_string(next_item_ + static_cast<int64_t>(got) / item_bytes_));
  }
  next_item_ += count;
}

void IdxReader::expect_end() {
  if (next_item_ != items()) {
    throw UsageError(path_ + ": only " + std::to_string(next_item_) + " of " +
                     std::to_string(items()) + " items were read");
  }
  uint8_t extra = 0;
  if (read_up_to(&extra, 1) > 0) {
    throw UsageError(path_ + ": unexpected data after the " + std::to_string(items()) +
                     " items the header declares");
  }
  if (cut_short_) {
    throw UsageError(path_ +
                     ": truncated: the gzip stream ends before the checksum that "
                     "verifies its data");
  }
}

IdxPair open_idx_pair(const std::string& images_path, const std::string& labels_path,
                      int num_classes) {
  IdxPair pair{IdxReader(images_path, 3), labels_path, {}, num_classes};
  IdxReader labels(labels_path, 1);
  if (labels.items() != pair.images.items()) {
    throw UsageError(images_path + " has " + std::to_string(pair.images.items()) + " images but " +
                     labels_path + " has " + std::to_string(labels.items()) + " labels");
  }
  std::vector<uint8_t> raw(static_cast<size_t>(labels.items()));
  labels.read(labels.items(), raw.data());
  labels.expect_end();
  pair.labels.assign(raw.begin(), raw.end());
  const auto max_it = std::max_element(pair.labels.begin(), pair.labels.end());
  if (num_classes <= 0) {
    pair.num_classes = *max_it + 1;
  } else if (*max_it >= num_classes) {
    throw UsageError(labels_path + ": label " + std::to_string(*max_it) + " at item " +
                     std::to_string(max_it - pair.labels.begin()) + " is outside [0, " +
                     std::to_string(num_classes) + ")");
  }
  return pair;
}

std::vector<uint8_t> validation_rows(int64_t n, int64_t val_count, uint64_t seed) {
  HT_REQUIRE(n >= 0 && val_count >= 0 && val_count <= n, "validation_rows: bad counts");
  // The first val_count steps of a Fisher-Yates shuffle: a uniform random subset.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(seed);
  std::vector<uint8_t> is_val(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < val_count; ++i) {
    const auto j = i + static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(n - i)));
    std::swap(order[i], order[j]);
    is_val[order[i]] = 1;
  }
  return is_val;
}

void write_idx_rows(IdxPair& pair, const std::vector<uint8_t>& part,
                    const std::vector<DatasetWriter*>& writers) {
  const int64_t n = pair.images.items();
  const int64_t item = pair.images.item_bytes();
  HT_REQUIRE(!writers.empty(), "write_idx_rows: no writers");
  HT_REQUIRE(part.empty() || static_cast<int64_t>(part.size()) == n,
             "write_idx_rows: one part per row needed");

  // 1. Read a block of rows; 2. sort it into a staging buffer per writer, preserving
  // order; 3. append each buffer. Memory stays at a few blocks whatever N is.
  const int64_t rows_per_append = stream_batch_rows(item);
  std::vector<uint8_t> block(static_cast<size_t>(rows_per_append * item));
  std::vector<std::vector<uint8_t>> images(writers.size());
  std::vector<std::vector<int32_t>> labels(writers.size());
  ProgressNote note("converting " + writers.front()->path(), n);
  for (int64_t start = 0; start < n; start += rows_per_append) {
    note.update(start);
    const int64_t count = std::min(rows_per_append, n - start);
    pair.images.read(count, block.data());
    for (int64_t i = 0; i < count; ++i) {
      const size_t w = part.empty() ? 0 : part[start + i];
      HT_REQUIRE(w < writers.size(), "write_idx_rows: part out of range");
      images[w].insert(images[w].end(), block.begin() + i * item, block.begin() + (i + 1) * item);
      labels[w].push_back(pair.labels[start + i]);
    }
    for (size_t w = 0; w < writers.size(); ++w) {
      if (labels[w].empty()) continue;
      writers[w]->append(static_cast<int64_t>(labels[w].size()), images[w].data(),
                         labels[w].data());
      images[w].clear();
      labels[w].clear();
    }
  }
  pair.images.expect_end();
}

}  // namespace hpctrain
