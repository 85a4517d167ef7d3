// Reading the project's HDF5 data format (docs/formats.md, "Data files"):
//   /images  [N, C, H, W]  uint8 | float16 | float32
//   /labels  [N]           integer class ids in [0, num_classes)
//   root attributes (optional): num_classes, class_names, source, normalisation
// A rank reads only its rows through HDF5 hyperslabs. Use one DatasetFile from one thread,
// except read_row_set with a thread-safe HDF5 library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/sample_type.hpp"
#include "h5/h5.hpp"

namespace hpctrain {

struct DatasetShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  SampleType type = SampleType::kU8;
  int num_classes = 0;                   // attribute, else class_names.size(), else max label + 1
  std::vector<std::string> class_names;  // may be empty
  int64_t sample_elems() const { return c * h * w; }
  size_t sample_bytes() const {
    return static_cast<size_t>(sample_elems()) * sample_type_size(type);
  }
};

class DatasetFile {
 public:
  // Opens and validates; throws UsageError naming the file and what is wrong
  // (missing file or dataset, wrong rank, unsupported type, N mismatch).
  explicit DatasetFile(const std::string& path);

  const std::string& path() const { return path_; }
  const DatasetShape& shape() const { return shape_; }

  // Reads rows [start, start + count) in the stored element type into `images`
  // (count * sample_bytes()) and the labels as int32. Throws UsageError if a
  // label is outside [0, num_classes).
  void read_rows(int64_t start, int64_t count, void* images, int32_t* labels) const;
  // Reads only the labels of rows [start, start + count), checked the same way.
  void read_labels(int64_t start, int64_t count, int32_t* labels) const;
  // Reads the `count` rows listed in `rows` (strictly increasing), in that order: one read
  // per run of consecutive rows. Safe from several threads at once when the HDF5 library
  // is thread-safe (h5_threadsafe()).
  void read_row_set(const int64_t* rows, int64_t count, void* images, int32_t* labels) const;

 private:
  std::string path_;
  DatasetShape shape_;
  H5Handle file_, images_, labels_;
};

}  // namespace hpctrain
