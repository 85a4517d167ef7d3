// DatasetFile: opens one data file, validates it against the format (docs/formats.md, "Data
// files") and reads row ranges through hyperslabs. Every check names the file, so a bad
// path in a config ends the job with one line saying what is wrong with which file.
#include "data/dataset_file.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "data/dataset_checks.hpp"

namespace hpctrain {

namespace {

using dataset_checks::check_extent;
using dataset_checks::check_label_dataset;
using dataset_checks::check_token_type;
using dataset_checks::dataset_dims;
using dataset_checks::describe_type;
using dataset_checks::image_type;
using dataset_checks::open_dataset;

// Labels are scanned in blocks so that num_classes can be found in bounded memory.
constexpr int64_t kLabelBlock = 1 << 20;

// Memory type for reading samples in their stored type, with no value conversion (token
// ids of any integer type are read as int32).
H5Handle image_memory_type(SampleType t) {
  switch (t) {
    case SampleType::kU8:
      return H5Handle(H5T_NATIVE_UINT8, nullptr);  // library-owned: never closed
    case SampleType::kF16:
      return h5_float16_type();
    case SampleType::kToken:
      return H5Handle(H5T_NATIVE_INT32, nullptr);
    case SampleType::kF32:
      return H5Handle(H5T_NATIVE_FLOAT, nullptr);
  }
  return H5Handle();
}

// A label or token id as read into int32: HDF5 converts a wider integer out of range to
// the nearest bound, so a bound stands for itself or anything beyond it.
std::string id_text(int32_t v) {
  if (v == std::numeric_limits<int32_t>::max()) return std::to_string(v) + " or more";
  if (v == std::numeric_limits<int32_t>::min()) return std::to_string(v) + " or less";
  return std::to_string(v);
}

// Reads labels [start, start + count) of a rank-1 dataset as int32.
void read_label_range(hid_t labels, int64_t start, int64_t count, int32_t* out) {
  H5Handle file_space(HT_CHECK_H5(H5Dget_space(labels)), H5Sclose);
  const hsize_t offset[1] = {static_cast<hsize_t>(start)};
  const hsize_t n[1] = {static_cast<hsize_t>(count)};
  HT_CHECK_H5(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset, nullptr, n, nullptr));
  H5Handle mem_space(HT_CHECK_H5(H5Screate_simple(1, n, nullptr)), H5Sclose);
  HT_CHECK_H5(
      H5Dread(labels, H5T_NATIVE_INT32, mem_space.get(), file_space.get(), H5P_DEFAULT, out));
}

// Reads a scalar (or one-element) integer attribute.
int64_t read_int_attribute(hid_t file, const char* name, const std::string& path) {
  H5Handle attr(HT_CHECK_H5(H5Aopen(file, name, H5P_DEFAULT)), H5Aclose);
  H5Handle type(HT_CHECK_H5(H5Aget_type(attr.get())), H5Tclose);
  H5Handle space(HT_CHECK_H5(H5Aget_space(attr.get())), H5Sclose);
  if (HT_CHECK_H5(H5Tget_class(type.get())) != H5T_INTEGER ||
      HT_CHECK_H5(H5Sget_simple_extent_npoints(space.get())) != 1) {
    throw UsageError(path + ": attribute " + name + " must be a single integer, found " +
                     describe_type(type.get()));
  }
  int64_t value = 0;
  HT_CHECK_H5(H5Aread(attr.get(), H5T_NATIVE_INT64, &value));
  return value;
}

// The per-channel attributes mean and std (both or neither): numbers, one per channel.
void read_normalisation(hid_t file, const std::string& path, DatasetShape& shape) {
  const bool has_mean = HT_CHECK_H5(H5Aexists(file, "mean")) > 0;
  if (has_mean != (HT_CHECK_H5(H5Aexists(file, "std")) > 0)) {
    throw UsageError(path + ": has attribute " + (has_mean ? "mean" : "std") + " without " +
                     (has_mean ? "std" : "mean"));
  }
  if (!has_mean) return;
  for (const auto& [name, out] :
       {std::pair<const char*, std::vector<double>*>{"mean", &shape.mean},
        std::pair<const char*, std::vector<double>*>{"std", &shape.stddev}}) {
    H5Handle attr(HT_CHECK_H5(H5Aopen(file, name, H5P_DEFAULT)), H5Aclose);
    H5Handle type(HT_CHECK_H5(H5Aget_type(attr.get())), H5Tclose);
    H5Handle space(HT_CHECK_H5(H5Aget_space(attr.get())), H5Sclose);
    const hssize_t n = HT_CHECK_H5(H5Sget_simple_extent_npoints(space.get()));
    if (HT_CHECK_H5(H5Tget_class(type.get())) != H5T_FLOAT || n != shape.c) {
      throw UsageError(path + ": attribute " + name + " must hold " + std::to_string(shape.c) +
                       " float value(s), one per channel (found " + std::to_string(n) + " " +
                       describe_type(type.get()) + ")");
    }
    out->resize(static_cast<size_t>(n));
    HT_CHECK_H5(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, out->data()));
  }
}

// The class count: the num_classes attribute, else the class names, else one scan of the
// labels; at most kMaxClasses either way.
void read_classes(hid_t file, hid_t labels, const std::string& path, DatasetShape& shape) {
  if (HT_CHECK_H5(H5Aexists(file, "class_names")) > 0) {
    H5Handle attr(HT_CHECK_H5(H5Aopen(file, "class_names", H5P_DEFAULT)), H5Aclose);
    shape.class_names = h5_read_strings(attr.get(), path + ": attribute class_names");
  }
  if (HT_CHECK_H5(H5Aexists(file, "num_classes")) > 0) {
    const int64_t k = read_int_attribute(file, "num_classes", path);
    if (k < 1 || k > kMaxClasses) {
      throw UsageError(path + ": attribute num_classes is " + std::to_string(k) +
                       ", expected 1 to " + std::to_string(kMaxClasses));
    }
    shape.num_classes = static_cast<int>(k);
    if (!shape.class_names.empty() &&
        shape.class_names.size() != static_cast<size_t>(shape.num_classes)) {
      throw UsageError(path + ": attribute class_names has " +
                       std::to_string(shape.class_names.size()) + " names but num_classes is " +
                       std::to_string(k));
    }
    return;
  }
  if (!shape.class_names.empty()) {
    if (static_cast<int64_t>(shape.class_names.size()) > kMaxClasses) {
      throw UsageError(path + ": attribute class_names has " +
                       std::to_string(shape.class_names.size()) + " names, more than " +
                       std::to_string(kMaxClasses) + " classes");
    }
    shape.num_classes = static_cast<int>(shape.class_names.size());
    return;
  }
  std::vector<int32_t> block(static_cast<size_t>(std::min(shape.n, kLabelBlock)));
  int32_t max_label = -1;
  for (int64_t start = 0; start < shape.n; start += kLabelBlock) {
    const int64_t count = std::min(kLabelBlock, shape.n - start);
    read_label_range(labels, start, count, block.data());
    for (int64_t i = 0; i < count; ++i) {
      if (block[i] < 0) {
        throw UsageError(path + ": label " + id_text(block[i]) + " at row " +
                         std::to_string(start + i) + " is negative");
      }
      max_label = std::max(max_label, block[i]);
    }
  }
  if (int64_t{max_label} + 1 > kMaxClasses) {  // int64: a label of INT32_MAX cannot overflow
    throw UsageError(path + ": the largest label is " + id_text(max_label) + ", more than " +
                     std::to_string(kMaxClasses) +
                     " classes (without a num_classes attribute, labels count the classes)");
  }
  shape.num_classes = max_label + 1;
}

// Ids are read into the model as float values: exact up to 2^24.
constexpr int64_t kMaxVocab = int64_t{1} << 24;

}  // namespace

std::pair<int64_t, const char*> first_nonfinite(const void* images, SampleType type, int64_t count,
                                                int64_t elems) {
  const size_t n = static_cast<size_t>(count * elems);
  if (type == SampleType::kF32) {
    const auto* v = static_cast<const float*>(images);
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i])) {
        return {static_cast<int64_t>(i) / elems, std::isnan(v[i]) ? "nan" : "inf"};
      }
    }
  } else if (type == SampleType::kF16) {
    const auto* v = static_cast<const uint16_t*>(images);
    for (size_t i = 0; i < n; ++i) {
      if ((v[i] & 0x7c00u) == 0x7c00u) {  // all exponent bits set: inf or nan
        return {static_cast<int64_t>(i) / elems, (v[i] & 0x3ffu) != 0 ? "nan" : "inf"};
      }
    }
  }
  return {-1, ""};
}

DatasetFile::DatasetFile(const std::string& path, StoredStats stats) : path_(path) {
  h5_quiet();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    // ec: a link loop (ELOOP), a folder that cannot be searched (EACCES), ...
    throw UsageError(path + ": " + (ec ? ec.message() : std::string("no such file")));
  }
  // Opening a FIFO would wait for a writer forever.
  if (!std::filesystem::is_directory(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw UsageError(path + ": not a regular file (a FIFO, a device or a socket)");
  }
  if (!std::ifstream(path, std::ios::binary)) throw UsageError(path + ": cannot open for reading");
  // H5Fis_hdf5 is negative for things it cannot even open (a directory): not HDF5 either.
  if (std::filesystem::is_directory(path, ec) || H5Fis_hdf5(path.c_str()) <= 0) {
    throw UsageError(path + ": not an HDF5 file");
  }
  // A file that passes H5Fis_hdf5 may still be damaged anywhere past its superblock.
  h5_reading(path, [&] {
    file_ = h5_open_read_only(path);
    // The descriptor HDF5 reads through (the sec2 driver's, the default; a driver chosen by
    // HDF5_DRIVER has handles of its own, and the file goes unwatched).
    struct stat st {};
    if (const int fd = h5_descriptor(file_.get()); fd >= 0 && ::fstat(fd, &st) == 0) {
      fd_ = fd;
      opened_size_ = st.st_size;
      opened_mtime_s_ = st.st_mtim.tv_sec;
      opened_mtime_ns_ = st.st_mtim.tv_nsec;
    }
    if (HT_CHECK_H5(H5Lexists(file_.get(), "tokens", H5P_DEFAULT)) > 0) {
      open_tokens();
    } else {
      open_images();
      if (stats == StoredStats::kRead) read_normalisation(file_.get(), path, shape_);
    }
  });
}

void DatasetFile::open_images() {
  const std::string& path = path_;
  images_ = open_dataset(file_.get(), path, "images");
  labels_ = open_dataset(file_.get(), path, "labels");

  // 1. Shapes: images [N, C, H, W], labels [N], same N, nothing empty.
  const std::vector<hsize_t> image_dims = dataset_dims(images_.get());
  if (image_dims.size() != 4) {
    throw UsageError(path + ": /images has rank " + std::to_string(image_dims.size()) +
                     ", expected 4 [N, C, H, W]");
  }
  check_label_dataset(labels_.get(), path, image_dims[0], "/images");
  if (image_dims[0] == 0) throw UsageError(path + ": no samples (N = 0)");
  if (image_dims[1] == 0 || image_dims[2] == 0 || image_dims[3] == 0) {
    throw UsageError(path + ": /images has an empty sample shape [" +
                     std::to_string(image_dims[1]) + ", " + std::to_string(image_dims[2]) + ", " +
                     std::to_string(image_dims[3]) + "]");
  }
  check_extent(path, "/images", image_dims);
  shape_.n = static_cast<int64_t>(image_dims[0]);
  shape_.c = static_cast<int64_t>(image_dims[1]);
  shape_.h = static_cast<int64_t>(image_dims[2]);
  shape_.w = static_cast<int64_t>(image_dims[3]);

  // 2. Element types: images u8/f16/f32; labels any integer type (read as int32).
  shape_.type = image_type(images_.get(), path);
  read_classes(file_.get(), labels_.get(), path, shape_);
}

void DatasetFile::open_tokens() {
  const std::string& path = path_;
  images_ = open_dataset(file_.get(), path, "tokens");
  const std::vector<hsize_t> dims = dataset_dims(images_.get());
  if (dims.size() != 2) {
    throw UsageError(path + ": /tokens has rank " + std::to_string(dims.size()) +
                     ", expected 2 [N, T] (with /labels) or [N, T + 1]");
  }
  check_token_type(images_.get(), path);
  if (dims[0] == 0) throw UsageError(path + ": no samples (N = 0)");
  if (HT_CHECK_H5(H5Aexists(file_.get(), "vocab_size")) <= 0) {
    throw UsageError(path + ": attribute vocab_size is missing (a token file needs it)");
  }
  shape_.vocab_size = read_int_attribute(file_.get(), "vocab_size", path);
  if (shape_.vocab_size < 1 || shape_.vocab_size > kMaxVocab) {
    throw UsageError(path + ": attribute vocab_size is " + std::to_string(shape_.vocab_size) +
                     ", expected 1 to " + std::to_string(kMaxVocab));
  }
  if (HT_CHECK_H5(H5Aexists(file_.get(), "vocabulary")) > 0) {
    H5Handle attr(HT_CHECK_H5(H5Aopen(file_.get(), "vocabulary", H5P_DEFAULT)), H5Aclose);
    shape_.vocabulary = h5_read_strings(attr.get(), path + ": attribute vocabulary");
    if (static_cast<int64_t>(shape_.vocabulary.size()) != shape_.vocab_size) {
      throw UsageError(path + ": attribute vocabulary has " +
                       std::to_string(shape_.vocabulary.size()) + " entries but vocab_size is " +
                       std::to_string(shape_.vocab_size));
    }
  }
  if (HT_CHECK_H5(H5Aexists(file_.get(), "level")) > 0) {
    H5Handle attr(HT_CHECK_H5(H5Aopen(file_.get(), "level", H5P_DEFAULT)), H5Aclose);
    const std::vector<std::string> level = h5_read_strings(attr.get(), path + ": attribute level");
    if (level.size() != 1 || (level[0] != "char" && level[0] != "word")) {
      throw UsageError(path + ": attribute level must be \"char\" or \"word\"");
    }
    shape_.level = level[0];
  }
  check_extent(path, "/tokens", dims);
  shape_.n = static_cast<int64_t>(dims[0]);
  shape_.c = shape_.h = 1;
  shape_.type = SampleType::kToken;
  if (HT_CHECK_H5(H5Lexists(file_.get(), "labels", H5P_DEFAULT)) > 0) {
    labels_ = open_dataset(file_.get(), path, "labels");
    check_label_dataset(labels_.get(), path, dims[0], "/tokens");
    if (dims[1] < 1) throw UsageError(path + ": /tokens has no columns");
    shape_.w = static_cast<int64_t>(dims[1]);
    read_classes(file_.get(), labels_.get(), path, shape_);
    return;
  }
  // Language modelling: the model reads columns 0..T-1 and predicts columns 1..T. T >= 2:
  // with one target per row it would be taken for a file of labelled sequences.
  if (dims[1] < 3) {
    throw UsageError(path + ": /tokens [N, T + 1] without /labels needs T + 1 >= 3 columns");
  }
  shape_.w = static_cast<int64_t>(dims[1]) - 1;
  shape_.labels_per_sample = shape_.w;
  if (shape_.vocab_size > std::numeric_limits<int>::max()) {
    throw UsageError(path + ": vocab_size too large");
  }
  shape_.num_classes = static_cast<int>(shape_.vocab_size);
}

void DatasetFile::read_token_block(int64_t row, int64_t count, int64_t col, int32_t* out) const {
  H5Handle file_space(HT_CHECK_H5(H5Dget_space(images_.get())), H5Sclose);
  const hsize_t offset[2] = {static_cast<hsize_t>(row), static_cast<hsize_t>(col)};
  const hsize_t dims[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(shape_.w)};
  HT_CHECK_H5(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset, nullptr, dims, nullptr));
  H5Handle mem_space(HT_CHECK_H5(H5Screate_simple(2, dims, nullptr)), H5Sclose);
  HT_CHECK_H5(H5Dread(images_.get(), H5T_NATIVE_INT32, mem_space.get(), file_space.get(),
                      H5P_DEFAULT, out));
  const int64_t n = count * shape_.w;
  for (int64_t i = 0; i < n; ++i) {
    if (out[i] < 0 || out[i] >= shape_.vocab_size) {
      throw UsageError(path_ + ": token " + id_text(out[i]) + " at row " +
                       std::to_string(row + i / shape_.w) + ", column " +
                       std::to_string(col + i % shape_.w) + " of /tokens is outside [0, " +
                       std::to_string(shape_.vocab_size) + ") (vocab_size)");
    }
  }
}

void DatasetFile::check_finite(const void* images, int64_t count, int64_t start,
                               const int64_t* rows) const {
  const auto [i, what] = first_nonfinite(images, shape_.type, count, shape_.sample_elems());
  if (i < 0) return;
  throw UsageError(path_ + ": /images holds a non-finite value (" + what + ") at row " +
                   std::to_string(rows != nullptr ? rows[i] : start + i));
}

void DatasetFile::check_labels(const int32_t* labels, int64_t count, int64_t start,
                               const int64_t* rows) const {
  for (int64_t i = 0; i < count; ++i) {
    if (labels[i] < 0 || labels[i] >= shape_.num_classes) {
      throw UsageError(path_ + ": label " + id_text(labels[i]) + " at row " +
                       std::to_string(rows != nullptr ? rows[i] : start + i) + " is outside [0, " +
                       std::to_string(shape_.num_classes) + ")");
    }
  }
}

void DatasetFile::check_unchanged() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return;
  if (st.st_size == opened_size_ && st.st_mtim.tv_sec == opened_mtime_s_ &&
      st.st_mtim.tv_nsec == opened_mtime_ns_) {
    return;
  }
  throw UsageError(path_ + ": changed while this job reads it (" +
                   (st.st_size != opened_size_
                        ? std::to_string(opened_size_) + " bytes when opened, " +
                              std::to_string(st.st_size) + " now"
                        : std::string("written since it was opened")) +
                   "): a data file must not change during a run; put it back and resume from "
                   "the last checkpoint");
}

template <typename Read>
void DatasetFile::read_checked(Read&& read) const {
  h5_reading(path_, [&] {
    try {
      read();
    } catch (const Error&) {
      check_unchanged();
      throw;
    }
    check_unchanged();
  });
}

void DatasetFile::read_rows(int64_t start, int64_t count, void* images, int32_t* labels) const {
  read_checked([&] {
    HT_REQUIRE(start >= 0 && count >= 0 && start <= shape_.n && count <= shape_.n - start,
               path_ + ": rows [" + std::to_string(start) + ", " + std::to_string(start + count) +
                   ") outside [0, " + std::to_string(shape_.n) + ")");
    if (count == 0) return;
    HT_REQUIRE(images != nullptr && labels != nullptr, "read_rows: null output buffer");
    if (shape_.tokens()) {
      read_token_block(start, count, 0, static_cast<int32_t*>(images));
      read_label_rows(start, count, labels);
      return;
    }

    // 1. Images: one hyperslab of whole samples, copied in the stored type.
    H5Handle file_space(HT_CHECK_H5(H5Dget_space(images_.get())), H5Sclose);
    const hsize_t offset[4] = {static_cast<hsize_t>(start), 0, 0, 0};
    const hsize_t dims[4] = {static_cast<hsize_t>(count), static_cast<hsize_t>(shape_.c),
                             static_cast<hsize_t>(shape_.h), static_cast<hsize_t>(shape_.w)};
    HT_CHECK_H5(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset, nullptr, dims, nullptr));
    H5Handle mem_space(HT_CHECK_H5(H5Screate_simple(4, dims, nullptr)), H5Sclose);
    const H5Handle mem_type = image_memory_type(shape_.type);
    HT_CHECK_H5(H5Dread(images_.get(), mem_type.get(), mem_space.get(), file_space.get(),
                        H5P_DEFAULT, images));
    check_finite(images, count, start, nullptr);

    // 2. Labels, range-checked here so a bad file fails with its row, not as a wild index.
    read_label_rows(start, count, labels);
  });
}

void DatasetFile::read_row_set(const int64_t* rows, int64_t count, void* images,
                               int32_t* labels) const {
  read_checked([&] {
    if (count == 0) return;
    HT_REQUIRE(rows[0] >= 0 && rows[count - 1] < shape_.n, path_ + ": a row outside the file");
    // One read per run of consecutive rows: HDF5 handles many small simple selections far
    // faster than one union of them.
    auto* out = static_cast<uint8_t*>(images);
    const size_t per_sample = static_cast<size_t>(shape_.labels_per_sample);
    for (int64_t i = 0; i < count;) {
      int64_t j = i + 1;
      while (j < count && rows[j] == rows[j - 1] + 1) ++j;
      HT_REQUIRE(j == count || rows[j] > rows[j - 1], "read_row_set: rows not increasing");
      if (shape_.tokens()) {
        read_token_block(
            rows[i], j - i, 0,
            reinterpret_cast<int32_t*>(out + static_cast<size_t>(i) * shape_.sample_bytes()));
        read_label_rows(rows[i], j - i, labels + static_cast<size_t>(i) * per_sample);
      } else {
        read_image_run(rows[i], j - i, out + static_cast<size_t>(i) * shape_.sample_bytes(),
                       labels + i);
      }
      i = j;
    }
    if (!shape_.tokens()) {
      check_finite(images, count, 0, rows);
      check_labels(labels, count, 0, rows);
    }
  });
}

void DatasetFile::read_image_run(int64_t row, int64_t count, uint8_t* images,
                                 int32_t* labels) const {
  H5Handle image_space(HT_CHECK_H5(H5Dget_space(images_.get())), H5Sclose);
  H5Handle label_space(HT_CHECK_H5(H5Dget_space(labels_.get())), H5Sclose);
  const H5Handle mem_type = image_memory_type(shape_.type);
  const hsize_t offset[4] = {static_cast<hsize_t>(row), 0, 0, 0};
  const hsize_t dims[4] = {static_cast<hsize_t>(count), static_cast<hsize_t>(shape_.c),
                           static_cast<hsize_t>(shape_.h), static_cast<hsize_t>(shape_.w)};
  HT_CHECK_H5(
      H5Sselect_hyperslab(image_space.get(), H5S_SELECT_SET, offset, nullptr, dims, nullptr));
  HT_CHECK_H5(
      H5Sselect_hyperslab(label_space.get(), H5S_SELECT_SET, offset, nullptr, dims, nullptr));
  H5Handle image_mem(HT_CHECK_H5(H5Screate_simple(4, dims, nullptr)), H5Sclose);
  H5Handle label_mem(HT_CHECK_H5(H5Screate_simple(1, dims, nullptr)), H5Sclose);
  HT_CHECK_H5(H5Dread(images_.get(), mem_type.get(), image_mem.get(), image_space.get(),
                      H5P_DEFAULT, images));
  HT_CHECK_H5(H5Dread(labels_.get(), H5T_NATIVE_INT32, label_mem.get(), label_space.get(),
                      H5P_DEFAULT, labels));
}

void DatasetFile::read_labels(int64_t start, int64_t count, int32_t* labels) const {
  read_checked([&] { read_label_rows(start, count, labels); });
}

void DatasetFile::read_label_rows(int64_t start, int64_t count, int32_t* labels) const {
  HT_REQUIRE(start >= 0 && count >= 0 && start <= shape_.n && count <= shape_.n - start,
             path_ + ": label rows [" + std::to_string(start) + ", " +
                 std::to_string(start + count) + ") outside [0, " + std::to_string(shape_.n) + ")");
  if (count == 0) return;
  HT_REQUIRE(labels != nullptr, "read_labels: null output buffer");
  if (!labels_.valid()) {
    read_token_block(start, count, 1, labels);  // the next tokens
    return;
  }
  read_label_range(labels_.get(), start, count, labels);
  check_labels(labels, count, start, nullptr);
}

}  // namespace hpctrain
