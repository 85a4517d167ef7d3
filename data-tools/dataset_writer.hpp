// DatasetWriter: creates a data file in the project's format (docs/formats.md, "Data files";
// dataset_file.hpp reads it) by appending batches of samples, so that converters stream
// in bounded memory. The file appears under its final name only once it is complete.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/files.hpp"
#include "data/dataset_file.hpp"
#include "h5/h5.hpp"

namespace hpctrain {

struct DatasetWriterOptions {
  SampleType type = SampleType::kU8;
  int64_t c = 1, h = 1, w = 1;           // sample shape [C, H, W]
  int num_classes = 0;                   // required (> 0); every appended label is checked
  std::vector<std::string> class_names;  // optional; if given, one per class
  std::string source;                    // optional: where the data came from
  std::vector<double> mean, stddev;      // optional: the attributes mean and std (stats)
  int64_t chunk_samples = 0;             // samples per HDF5 chunk; 0 = about 64 KiB
  int deflate_level = 0;                 // 0 = uncompressed, 1-9 = deflate (with shuffle)
};

// Owns the file being written. Not thread-safe. Rows go to PATH.tmp (an OwnedTemporary:
// renamed only while it is still this writer's); close() flushes, fsyncs and renames it to
// PATH. The destructor closes a writer that was not closed, except while an exception
// unwinds: then the temporary file is removed, so a failed conversion never leaves a
// half-written file under either name.
class DatasetWriter {
 public:
  DatasetWriter(const std::string& path, const DatasetWriterOptions& options);
  ~DatasetWriter();
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // Appends `count` samples (count * C*H*W elements of the options' type, row-major;
  // float16 as raw uint16 bits) and their labels. Throws UsageError naming the file if a
  // label is outside [0, num_classes).
  void append(int64_t count, const void* images, const int32_t* labels);

  // Finishes the file and moves it to its final name. Idempotent.
  void close();

  // Finishes the file (flushed and synced) under its temporary name, for a later close()
  // or commit_together(). Idempotent; append() may not follow.
  void finish();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  int64_t rows() const { return rows_; }
  int64_t chunk_samples() const { return chunk_samples_; }

 private:
  void create_datasets();
  void write_attributes();
  void abandon() noexcept;

  std::string path_, temp_path_;
  std::optional<OwnedTemporary> temp_;  // temp_path_, from the constructor to the rename
  DatasetWriterOptions options_;
  int64_t chunk_samples_ = 0;
  int64_t rows_ = 0;
  bool finished_ = false;             // the temporary file is complete
  bool closed_ = false;               // ... and renamed (or abandoned)
  int uncaught_at_construction_ = 0;  // to tell unwinding from normal destruction
  H5Handle file_, images_, labels_, image_type_;
};

// Throws UsageError naming `path` unless a file can be created there: not a directory (nor
// a name ending in '/'), in a directory that exists and is writable. DatasetWriter checks
// its output so; writers of other files call it before any work.
void check_output_file(const std::string& path);

// The files of one command that belong together (train, val and test; the shards of a
// file): each is finished first, then every earlier file under their names is removed, and
// the `earlier` files of the set that this run does not write (output_set.hpp), then each
// is renamed. A failure or a kill before the renames leaves the earlier set as it was; one
// during them leaves files missing, never new files beside old ones that do not belong
// with them (an earlier split's test rows in the new training set).
void commit_together(const std::vector<DatasetWriter*>& writers,
                     const std::vector<std::string>& earlier = {});

}  // namespace hpctrain
