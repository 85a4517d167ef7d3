// Reading IDX files (the MNIST distribution format: big-endian header, unsigned bytes)
// whether gzip-compressed or plain, and streaming an image/label pair into data files.
// Every error is a UsageError naming the file.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain {

class DatasetWriter;

// Streams the items of one IDX file of unsigned bytes: reads and validates the header on
// construction, then hands out items in order. Owns its zlib stream (gzopen reads plain
// files unchanged, so both forms work). Move-only; not thread-safe.
class IdxReader {
 public:
  // `expected_rank` is the number of dimensions the header must declare (3 for images
  // [N, H, W], 1 for labels [N]).
  IdxReader(const std::string& path, int expected_rank);

  const std::string& path() const { return path_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t items() const { return dims_[0]; }
  int64_t item_bytes() const { return item_bytes_; }

  // Reads the next `count` items (count * item_bytes() bytes) into `dst`; throws if the
  // file ends first ("truncated").
  void read(int64_t count, uint8_t* dst);
  // Throws unless every item has been read and nothing follows them.
  void expect_end();

 private:
  struct GzClose {
    void operator()(gzFile_s* f) const { gzclose(f); }
  };
  // Reads up to `bytes`; fewer only at the end of the file. Throws on a read error.
  size_t read_up_to(void* dst, size_t bytes);

  std::string path_;
  std::unique_ptr<gzFile_s, GzClose> file_;
  std::vector<int64_t> dims_;
  int64_t item_bytes_ = 1;
  int64_t next_item_ = 0;
  bool cut_short_ = false;  // zlib found the gzip stream cut short (its data or its trailer)
};

// An IDX image file and its labels, checked to belong together: same count, and every
// label below num_classes. Labels are small (one byte each) and are read whole.
struct IdxPair {
  IdxReader images;
  std::string labels_path;
  std::vector<int32_t> labels;
  int num_classes = 0;
};

// Opens both files. num_classes > 0 requires every label to be below it; 0 takes the
// largest label + 1.
IdxPair open_idx_pair(const std::string& images_path, const std::string& labels_path,
                      int num_classes);

// Marks which of n rows go to the validation set: `val_count` rows drawn by a seeded
// permutation (hpctrain::Rng, so the split is the same on every platform). 1 = validation.
std::vector<uint8_t> validation_rows(int64_t n, int64_t val_count, uint64_t seed);

// Streams all images of `pair` (in bounded memory) into the writers: row i goes to
// writers[part[i]], or to writers[0] when `part` is empty. Rows keep their original
// order within each writer. Writers must be uint8 with shape [1, H, W] of the images.
void write_idx_rows(IdxPair& pair, const std::vector<uint8_t>& part,
                    const std::vector<DatasetWriter*>& writers);

}  // namespace hpctrain
