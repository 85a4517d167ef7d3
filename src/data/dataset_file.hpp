// Reading the project's HDF5 data format (docs/formats.md, "Data files", "Token files"):
//   /images  [N, C, H, W]  uint8 | float16 | float32
//   /labels  [N]           integer class ids in [0, num_classes)
//   root attributes (optional): num_classes, class_names, source, normalisation
// or token sequences, read as samples [1, 1, T] of type kToken:
//   /tokens  [N, T]        integer ids in [0, vocab_size), with /labels [N]: classification
//   /tokens  [N, T + 1]    without /labels: language modelling; a sample's T labels are its
//                          next tokens, columns 1..T of the same row (no second copy)
//   root attributes: vocab_size (required), vocabulary, level
// A rank reads only its rows through HDF5 hyperslabs. Use one DatasetFile from one thread,
// except read_row_set with a thread-safe HDF5 library. Every HDF5 failure names the file: a
// damaged or unsupported file is a UsageError (exit 2), an I/O error an Error (h5_reading).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/sample_type.hpp"
#include "h5/h5.hpp"

namespace hpctrain {

// The most classes a data file may have: more is not a data set but a damaged header (one
// claiming 2^31 classes once made inspect print gigabytes). hpctrain-data's --classes has
// the same bound.
inline constexpr int64_t kMaxClasses = 1000000;

struct DatasetShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  SampleType type = SampleType::kU8;
  int num_classes = 0;                   // attribute, else class_names.size(), else max label + 1
  std::vector<std::string> class_names;  // may be empty
  // Token files: the ids' range, and (optional attributes) each id's text and whether the
  // ids are characters or words.
  int64_t vocab_size = 0;
  std::vector<std::string> vocabulary;
  std::string level;
  // Root attributes mean and std (float, one per channel, of the samples as the network
  // gets them; `hpctrain-data stats` stores them); empty when absent.
  std::vector<double> mean, stddev;
  // Labels per sample: 1, or T for a language-model file (one target per step).
  int64_t labels_per_sample = 1;
  bool tokens() const { return type == SampleType::kToken; }
  int64_t sample_elems() const { return c * h * w; }
  size_t sample_bytes() const {
    return static_cast<size_t>(sample_elems()) * sample_type_size(type);
  }
  // A row as a loader keeps it in memory: the sample as stored and its labels as int32.
  size_t row_bytes() const {
    return sample_bytes() + static_cast<size_t>(labels_per_sample) * sizeof(int32_t);
  }
};

// The rows of a data set: one file (DatasetFile) or several read as one (DatasetFiles).
class DataSource {
 public:
  virtual ~DataSource() = default;
  // The file, or the files, for messages.
  virtual const std::string& path() const = 0;
  virtual const DatasetShape& shape() const = 0;

  // Reads rows [start, start + count) in the stored element type into `images`
  // (count * sample_bytes()) and the labels as int32 (count * labels_per_sample). Throws
  // UsageError if a label is outside [0, num_classes), a token outside [0, vocab_size) or
  // a float sample value is NaN or infinite.
  virtual void read_rows(int64_t start, int64_t count, void* images, int32_t* labels) const = 0;
  // Reads only the labels of rows [start, start + count), checked the same way
  // (labels_per_sample each).
  virtual void read_labels(int64_t start, int64_t count, int32_t* labels) const = 0;
  // Reads the `count` rows listed in `rows` (strictly increasing), in that order: one read
  // per run of consecutive rows. Safe from several threads at once when the HDF5 library
  // is thread-safe (h5_threadsafe()).
  virtual void read_row_set(const int64_t* rows, int64_t count, void* images,
                            int32_t* labels) const = 0;
};

// The first non-finite value among `count` samples of `elems` float16/float32 values at
// `images` (uint8 and tokens cannot hold one): its sample and "nan" or "inf"; -1 if none.
std::pair<int64_t, const char*> first_nonfinite(const void* images, SampleType type, int64_t count,
                                                int64_t elems);

// Whether opening a file reads its stored normalisation (the attributes mean and std) or
// leaves it out of the shape: `hpctrain-data stats` replaces it, so a damaged or half one
// (mean without std) must not stop it.
enum class StoredStats { kRead, kIgnore };

class DatasetFile final : public DataSource {
 public:
  // Opens and validates; throws UsageError naming the file and what is wrong
  // (missing file or dataset, wrong rank, unsupported type, N mismatch).
  explicit DatasetFile(const std::string& path, StoredStats stats = StoredStats::kRead);

  const std::string& path() const override { return path_; }
  const DatasetShape& shape() const override { return shape_; }
  void read_rows(int64_t start, int64_t count, void* images, int32_t* labels) const override;
  void read_labels(int64_t start, int64_t count, int32_t* labels) const override;
  void read_row_set(const int64_t* rows, int64_t count, void* images,
                    int32_t* labels) const override;

 private:
  void open_images();
  void open_tokens();
  // Reads columns [col, col + shape_.w) of rows [row, row + count) of /tokens into `out`
  // and checks that every id is in [0, vocab_size).
  void read_token_block(int64_t row, int64_t count, int64_t col, int32_t* out) const;
  // read_labels within a read already checked (read_checked): once per batch, not per run
  // of consecutive rows.
  void read_label_rows(int64_t start, int64_t count, int32_t* labels) const;
  // Images and labels of rows [row, row + count), unchecked.
  void read_image_run(int64_t row, int64_t count, uint8_t* images, int32_t* labels) const;
  // Throws UsageError naming the row of the first NaN or infinity in float samples;
  // `rows` as for check_labels.
  void check_finite(const void* images, int64_t count, int64_t start, const int64_t* rows) const;
  // Throws UsageError naming the row of the first label outside [0, num_classes); `rows`
  // names the file rows of `labels` (null: start, start + 1, ...).
  void check_labels(const int32_t* labels, int64_t count, int64_t start, const int64_t* rows) const;

  // Throws UsageError where the file HDF5 reads (its descriptor) has changed since it was
  // opened: truncated or written over in place, whose bytes HDF5 would read as zeros or as
  // another file's without a word (docs/formats.md: a data file must not change during a job).
  void check_unchanged() const;
  // h5_reading(path_, read), then check_unchanged(), which also goes first where `read`
  // fails: a value or a structure read from a changed file is named as that.
  template <typename Read>
  void read_checked(Read&& read) const;

  std::string path_;
  DatasetShape shape_;
  H5Handle file_, images_, labels_;  // images_: /images or /tokens; labels_ may be unset
  // The file as opened: HDF5's descriptor (-1 where its driver has none), size and
  // modification time.
  int fd_ = -1;
  int64_t opened_size_ = 0, opened_mtime_s_ = 0, opened_mtime_ns_ = 0;
};

}  // namespace hpctrain
