// DatasetWriter: extendible, chunked /images and /labels grown by each append, root
// attributes written up front, and commit by rename (write PATH.tmp, fsync, rename,
// fsync the directory) so readers never see a partial file under PATH.
#include "data-tools/dataset_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"

namespace hpctrain {
namespace {

// About 64 KiB per chunk: a few dozen small images, so a batch read touches few chunks
// and a random read of one sample decompresses little; never more than 1024 samples.
constexpr int64_t kTargetChunkBytes = 64 * 1024;
constexpr int64_t kMaxChunkSamples = 1024;
constexpr hsize_t kLabelChunk = 4096;

// Creates a dataset of `rank` dims, empty along N and unlimited there, chunked as given.
H5Handle create_extendible(hid_t file, const char* name, hid_t file_type, int rank,
                           const hsize_t* chunk, int deflate_level, bool shuffle) {
  std::vector<hsize_t> dims(chunk, chunk + rank), max_dims(chunk, chunk + rank);
  dims[0] = 0;
  max_dims[0] = H5S_UNLIMITED;
  H5Handle space(HT_CHECK_H5(H5Screate_simple(rank, dims.data(), max_dims.data())), H5Sclose);
  H5Handle dcpl(HT_CHECK_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  HT_CHECK_H5(H5Pset_chunk(dcpl.get(), rank, chunk));
  HT_CHECK_H5(H5Pset_obj_track_times(dcpl.get(), false));
  if (deflate_level > 0) {
    // Byte shuffle first groups the exponent bytes of f16/f32 samples: better ratios.
    if (shuffle) HT_CHECK_H5(H5Pset_shuffle(dcpl.get()));
    HT_CHECK_H5(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(deflate_level)));
  }
  return H5Handle(HT_CHECK_H5(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT,
                                         dcpl.get(), H5P_DEFAULT)),
                  H5Dclose);
}

// Grows `dataset` along N to `start + count` rows and writes `count` rows at `start` from
// `data`.
void append_rows(hid_t dataset, hid_t mem_type, int rank, const hsize_t* row_dims, int64_t start,
                 int64_t count, const void* data) {
  std::vector<hsize_t> extent(row_dims, row_dims + rank);
  extent[0] = static_cast<hsize_t>(start + count);
  HT_CHECK_H5(H5Dset_extent(dataset, extent.data()));
  H5Handle file_space(HT_CHECK_H5(H5Dget_space(dataset)), H5Sclose);
  std::vector<hsize_t> offset(static_cast<size_t>(rank), 0), block(row_dims, row_dims + rank);
  offset[0] = static_cast<hsize_t>(start);
  block[0] = static_cast<hsize_t>(count);
  HT_CHECK_H5(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset.data(), nullptr,
                                  block.data(), nullptr));
  H5Handle mem_space(HT_CHECK_H5(H5Screate_simple(rank, block.data(), nullptr)), H5Sclose);
  HT_CHECK_H5(H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data));
}

}  // namespace

DatasetWriter::DatasetWriter(const std::string& path, const DatasetWriterOptions& options)
    : path_(path),
      temp_path_(path + ".tmp"),
      options_(options),
      uncaught_at_construction_(std::uncaught_exceptions()) {
  if (options_.c < 1 || options_.h < 1 || options_.w < 1) {
    throw UsageError(path + ": sample shape [" + std::to_string(options_.c) + ", " +
                     std::to_string(options_.h) + ", " + std::to_string(options_.w) +
                     "] must be positive");
  }
  if (options_.num_classes < 1) throw UsageError(path + ": num_classes must be positive");
  if (!options_.class_names.empty() &&
      options_.class_names.size() != static_cast<size_t>(options_.num_classes)) {
    throw UsageError(path + ": " + std::to_string(options_.class_names.size()) +
                     " class names given for " + std::to_string(options_.num_classes) + " classes");
  }
  if (options_.deflate_level < 0 || options_.deflate_level > 9) {
    throw UsageError(path + ": deflate level must be 0-9, got " +
                     std::to_string(options_.deflate_level));
  }
  check_output_file(path);
  const int64_t sample_bytes =
      options_.c * options_.h * options_.w * static_cast<int64_t>(sample_type_size(options_.type));
  chunk_samples_ = options_.chunk_samples > 0
                       ? options_.chunk_samples
                       : std::clamp<int64_t>(kTargetChunkBytes / sample_bytes, 1, kMaxChunkSamples);

  h5_quiet();
  // Exclusively, after removing what an earlier run left (a link there is removed, never
  // written through); renamed only while the path still names this file.
  temp_.emplace(temp_path_, path_);
  const H5Handle fapl = h5_large_attribute_access();  // class names
  // No times in the headers: the same options give the same file (synth, split, shard...).
  const H5Handle fcpl = h5_untimed_creation();
  errno = 0;
  const hid_t created = H5Fcreate(temp_path_.c_str(), H5F_ACC_EXCL, fcpl.get(), fapl.get());
  if (created < 0) {        // a directory gone or not writable since the checks, /proc, a full disk
    const int err = errno;  // left by HDF5's open()
    throw Error(path_ + ": cannot write: cannot create " + temp_path_ +
                (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
  }
  file_ = H5Handle(created, H5Fclose);
  try {
    temp_->own(h5_descriptor(created));
    create_datasets();
    write_attributes();
  } catch (...) {
    abandon();  // the destructor does not run for a half-constructed object
    throw;
  }
}

DatasetWriter::~DatasetWriter() {
  if (closed_) return;
  if (std::uncaught_exceptions() > uncaught_at_construction_) {
    abandon();
    return;
  }
  try {
    close();
  } catch (const std::exception& e) {  // destructors log and never throw
    log_error(e.what());
    abandon();
  }
}

void DatasetWriter::create_datasets() {
  switch (options_.type) {
    case SampleType::kU8:
      image_type_ = H5Handle(H5T_STD_U8LE, nullptr);  // library-owned: never closed
      break;
    case SampleType::kF16:
      image_type_ = h5_float16_type();
      break;
    case SampleType::kF32:
      image_type_ = H5Handle(H5T_IEEE_F32LE, nullptr);
      break;
    case SampleType::kToken:  // image files only
      HT_REQUIRE(false, "DatasetWriter writes images");
  }
  const hsize_t image_chunk[4] = {
      static_cast<hsize_t>(chunk_samples_), static_cast<hsize_t>(options_.c),
      static_cast<hsize_t>(options_.h), static_cast<hsize_t>(options_.w)};
  images_ = create_extendible(file_.get(), "images", image_type_.get(), 4, image_chunk,
                              options_.deflate_level, options_.type != SampleType::kU8);
  const hsize_t label_chunk[1] = {kLabelChunk};
  labels_ = create_extendible(file_.get(), "labels", H5T_STD_I32LE, 1, label_chunk,
                              options_.deflate_level, false);
}

void DatasetWriter::write_attributes() {
  const hid_t root = file_.get();
  {
    H5Handle space(HT_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose);
    H5Handle attr(HT_CHECK_H5(H5Acreate2(root, "num_classes", H5T_STD_I32LE, space.get(),
                                         H5P_DEFAULT, H5P_DEFAULT)),
                  H5Aclose);
    const int32_t k = options_.num_classes;
    HT_CHECK_H5(H5Awrite(attr.get(), H5T_NATIVE_INT32, &k));
  }
  if (!options_.class_names.empty()) {
    h5_write_strings(root, "class_names", options_.class_names, false);
  }
  if (!options_.source.empty()) h5_write_strings(root, "source", {options_.source}, true);
  if (!options_.mean.empty()) {
    h5_write_doubles(root, "mean", options_.mean);
    h5_write_doubles(root, "std", options_.stddev);
  }
}

void DatasetWriter::append(int64_t count, const void* images, const int32_t* labels) {
  HT_REQUIRE(!closed_, path_ + ": append after close");
  HT_REQUIRE(count >= 0, path_ + ": negative append count");
  if (count == 0) return;
  HT_REQUIRE(images != nullptr && labels != nullptr, "append: null input buffer");
  for (int64_t i = 0; i < count; ++i) {
    if (labels[i] < 0 || labels[i] >= options_.num_classes) {
      throw UsageError(path_ + ": label " + std::to_string(labels[i]) + " at row " +
                       std::to_string(rows_ + i) + " is outside [0, " +
                       std::to_string(options_.num_classes) + ")");
    }
  }
  // The memory type equals the file type (no conversion): f16 is written as raw bits.
  const hsize_t row_dims[4] = {0, static_cast<hsize_t>(options_.c),
                               static_cast<hsize_t>(options_.h), static_cast<hsize_t>(options_.w)};
  const hsize_t label_dims[1] = {0};
  try {
    append_rows(images_.get(), image_type_.get(), 4, row_dims, rows_, count, images);
    append_rows(labels_.get(), H5T_NATIVE_INT32, 1, label_dims, rows_, count, labels);
  } catch (const Error& e) {  // a full disk, a failing file system: name the file
    throw Error(path_ + ": cannot write: " + e.what());
  }
  rows_ += count;
}

void DatasetWriter::finish() {
  if (finished_ || closed_) return;
  // 1. Flush through HDF5 while we can still see its errors (H5Handle ignores them).
  try {
    HT_CHECK_H5(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL));
  } catch (const Error& e) {
    throw Error(path_ + ": cannot write: " + e.what());
  }
  images_.reset();
  labels_.reset();
  image_type_.reset();
  file_.reset();
  // 2. Make the data durable before a name points at it (the file this writer created).
  temp_->sync();
  finished_ = true;
}

void DatasetWriter::close() {
  if (closed_) return;
  finish();
  temp_->commit();  // the rename, then the directory made durable
  closed_ = true;
}

void check_output_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec) || path.empty() || path.back() == '/') {
    throw UsageError(path + ": is a directory, not a file name for the output");
  }
  const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(parent, ec)) {
    throw UsageError(path + (std::filesystem::exists(parent, ec)
                                 ? ": " + parent.string() + " is not a directory"
                                 : ": directory " + parent.string() + " does not exist"));
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    throw UsageError(path + ": directory " + parent.string() + " is not writable");
  }
}

void commit_together(const std::vector<DatasetWriter*>& writers,
                     const std::vector<std::string>& earlier) {
  std::vector<std::string> paths = earlier;
  for (DatasetWriter* w : writers) {
    w->finish();
    paths.push_back(w->path());
  }
  remove_files(paths);
  for (DatasetWriter* w : writers) w->close();
}

void DatasetWriter::abandon() noexcept {
  images_.reset();
  labels_.reset();
  image_type_.reset();
  file_.reset();
  temp_.reset();  // the temporary file removed (where it is still this writer's)
  closed_ = true;
}

}  // namespace hpctrain
