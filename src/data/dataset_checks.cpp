// The checks of a data file's datasets as it is opened (docs/formats.md, "Data files"):
// each names the file and the dataset, where HDF5 itself would read a damaged or missing
// part as zeros or fill values without a word.
#include "data/dataset_checks.hpp"

#include <string>
#include <vector>

#include "core/error.hpp"

namespace hpctrain::dataset_checks {
namespace {

// Whether a float type is IEEE binary16 (bits 2) or binary32 (4) in all its bytes: bfloat16
// and other layouts are rejected, and so is a damaged header's (HDF5 converts by the fields).
bool is_ieee_float(hid_t type, size_t bytes) {
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  HT_CHECK_H5(H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize));
  const bool single = bytes == 4;
  return H5Tget_size(type) == bytes && H5Tget_offset(type) == 0 &&
         H5Tget_precision(type) == 8 * bytes && spos == 8 * bytes - 1 &&
         epos == (single ? 23u : 10u) && esize == (single ? 8u : 5u) && mpos == 0 &&
         msize == (single ? 23u : 10u) && H5Tget_ebias(type) == (single ? 127u : 15u);
}

// Throws UsageError where an integer type's bits lie outside its bytes: only a damaged header
// says so (a flipped byte), and HDF5 would read every value of it as 0 without a word.
void check_integer_bits(hid_t type, const std::string& path, const char* name) {
  const size_t precision = H5Tget_precision(type), bits = 8 * H5Tget_size(type);
  const int offset = H5Tget_offset(type);
  if (precision == 0 || offset < 0 || precision > bits ||
      static_cast<size_t>(offset) > bits - precision) {
    throw UsageError(path + ": " + name + " has a damaged integer type (" +
                     std::to_string(precision) + " bits at bit " + std::to_string(offset) + " of " +
                     std::to_string(bits) + ")");
  }
}

// Throws UsageError where a chunked dataset's chunk is larger than a dimension that cannot
// grow, or empty: HDF5 writes no such header (it refuses to create one), and HDF5 1.10 reads
// such a damaged one out of bounds (a segmentation fault).
void check_chunks(hid_t dataset, const std::string& path, const char* name) {
  H5Handle dcpl(HT_CHECK_H5(H5Dget_create_plist(dataset)), H5Pclose);
  if (HT_CHECK_H5(H5Pget_layout(dcpl.get())) != H5D_CHUNKED) return;
  H5Handle space(HT_CHECK_H5(H5Dget_space(dataset)), H5Sclose);
  const int rank = HT_CHECK_H5(H5Sget_simple_extent_ndims(space.get()));
  if (rank <= 0 || rank > H5S_MAX_RANK) return;
  hsize_t dims[H5S_MAX_RANK], max[H5S_MAX_RANK], chunk[H5S_MAX_RANK];
  HT_CHECK_H5(H5Sget_simple_extent_dims(space.get(), dims, max));
  if (HT_CHECK_H5(H5Pget_chunk(dcpl.get(), rank, chunk)) != rank) return;
  std::string shown, shape;
  bool damaged = false;
  for (int i = 0; i < rank; ++i) {
    damaged = damaged || chunk[i] == 0 || (max[i] != H5S_UNLIMITED && chunk[i] > max[i]);
    if (i > 0) {
      shown += ", ";
      shape += ", ";
    }
    shown += std::to_string(chunk[i]);
    shape += std::to_string(dims[i]);
  }
  if (damaged) {
    throw UsageError(path + ": /" + name + " has chunks of [" + shown +
                     "], larger than its shape [" + shape + "] allows (a damaged header)");
  }
}

}  // namespace

std::string describe_type(hid_t type) {
  const H5T_class_t cls = HT_CHECK_H5(H5Tget_class(type));
  const size_t bits = H5Tget_size(type) * 8;
  switch (cls) {
    case H5T_INTEGER:
      return (HT_CHECK_H5(H5Tget_sign(type)) == H5T_SGN_NONE ? "uint" : "int") +
             std::to_string(bits);
    case H5T_FLOAT:
      return "float" + std::to_string(bits);
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    default:
      return "HDF5 type class " + std::to_string(static_cast<int>(cls));
  }
}

H5Handle open_dataset(hid_t file, const std::string& path, const char* name) {
  if (HT_CHECK_H5(H5Lexists(file, name, H5P_DEFAULT)) <= 0) {
    throw UsageError(path + ": missing dataset '/" + name + "'");
  }
  if (H5Oexists_by_name(file, name, H5P_DEFAULT) <= 0) {  // fails for a missing external file
    H5Eclear2(H5E_DEFAULT);
    throw UsageError(path + ": '/" + std::string(name) +
                     "' is a link whose target does not open (a soft link to nothing, or an "
                     "external link to a missing file or object)");
  }
  {
    H5Handle object(HT_CHECK_H5(H5Oopen(file, name, H5P_DEFAULT)), H5Oclose);
    if (HT_CHECK_H5(H5Iget_type(object.get())) != H5I_DATASET) {
      throw UsageError(path + ": '/" + std::string(name) + "' is not a dataset");
    }
  }
  // A chunk cache of 16 MiB (HDF5's default is 1 MiB): a loader that reads each batch's
  // rows from the file (data.cache_mb) touches up to one chunk per row of a shuffled batch.
  H5Handle access(HT_CHECK_H5(H5Pcreate(H5P_DATASET_ACCESS)), H5Pclose);
  HT_CHECK_H5(H5Pset_chunk_cache(access.get(), 2053, size_t{16} << 20, 1.0));
  H5Handle dataset(HT_CHECK_H5(H5Dopen2(file, name, access.get())), H5Dclose);
  if (const std::string source = h5_missing_virtual_source(dataset.get(), path); !source.empty()) {
    throw UsageError(path + ": /" + name + " is a virtual dataset whose source " + source +
                     " cannot be opened (HDF5 would read its rows as the fill value)");
  }
  check_chunks(dataset.get(), path, name);
  if (const std::string what = h5_short_external_storage(dataset.get(), path); !what.empty()) {
    throw UsageError(path + ": /" + name + " is stored in external raw files, and " + what +
                     " (HDF5 reads what is missing as zeros)");
  }
  return dataset;
}

std::vector<hsize_t> dataset_dims(hid_t dataset) {
  H5Handle space(HT_CHECK_H5(H5Dget_space(dataset)), H5Sclose);
  const int rank = HT_CHECK_H5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  HT_CHECK_H5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return dims;
}

SampleType image_type(hid_t images, const std::string& path) {
  H5Handle type(HT_CHECK_H5(H5Dget_type(images)), H5Tclose);
  const H5T_class_t cls = HT_CHECK_H5(H5Tget_class(type.get()));
  const size_t size = H5Tget_size(type.get());
  if (cls == H5T_INTEGER && size == 1 && HT_CHECK_H5(H5Tget_sign(type.get())) == H5T_SGN_NONE) {
    check_integer_bits(type.get(), path, "/images");
    return SampleType::kU8;
  }
  if (cls == H5T_FLOAT && (size == 2 || size == 4)) {
    if (is_ieee_float(type.get(), size)) return size == 2 ? SampleType::kF16 : SampleType::kF32;
    throw UsageError(path + ": /images has a " + std::to_string(8 * size) +
                     "-bit float type that is not IEEE " + (size == 2 ? "binary16" : "binary32") +
                     " (bfloat16, or a damaged header)");
  }
  throw UsageError(path + ": /images has type " + describe_type(type.get()) +
                   ", expected uint8, float16 or float32");
}

void check_extent(const std::string& path, const char* name, const std::vector<hsize_t>& dims) {
  long double sample = 1, total = static_cast<long double>(dims[0]);
  for (size_t i = 1; i < dims.size(); ++i) sample *= static_cast<long double>(dims[i]);
  total *= sample;
  if (sample > static_cast<long double>(int64_t{1} << 31) ||
      total > static_cast<long double>(int64_t{1} << 50)) {
    std::string shape;
    for (const hsize_t d : dims) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw UsageError(path + ": " + name + " claims the shape [" + shape +
                     "], beyond what a data file can hold (damaged?)");
  }
}

void check_label_dataset(hid_t labels, const std::string& path, hsize_t n, const char* samples) {
  const std::vector<hsize_t> label_dims = dataset_dims(labels);
  if (label_dims.size() != 1) {
    throw UsageError(path + ": /labels has rank " + std::to_string(label_dims.size()) +
                     ", expected 1 [N]");
  }
  if (label_dims[0] != n) {
    throw UsageError(path + ": " + samples + " has " + std::to_string(n) +
                     " samples but /labels has " + std::to_string(label_dims[0]));
  }
  H5Handle label_type(HT_CHECK_H5(H5Dget_type(labels)), H5Tclose);
  if (HT_CHECK_H5(H5Tget_class(label_type.get())) != H5T_INTEGER) {
    throw UsageError(path + ": /labels has type " + describe_type(label_type.get()) +
                     ", expected integer class ids");
  }
  check_integer_bits(label_type.get(), path, "/labels");
}

void check_token_type(hid_t tokens, const std::string& path) {
  H5Handle type(HT_CHECK_H5(H5Dget_type(tokens)), H5Tclose);
  if (HT_CHECK_H5(H5Tget_class(type.get())) != H5T_INTEGER) {
    throw UsageError(path + ": /tokens has type " + describe_type(type.get()) +
                     ", expected integer token ids");
  }
  check_integer_bits(type.get(), path, "/tokens");
}

}  // namespace hpctrain::dataset_checks
