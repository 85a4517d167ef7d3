// HDF5 error reporting (the target of HT_CHECK_H5) and the small HDF5 helpers that the
// data files and the checkpoint files share: the float16 type, read-only opens and string
// attributes.
#include "h5/h5.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"

namespace hpctrain {

namespace {

// The operating system's words for the failure, when HDF5's error stack records one: its
// file drivers push "... errno = 28, error message = 'No space left on device' ...".
std::string system_error_text() {
  std::string text;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* entry, void* out) -> herr_t {
        const std::string desc = entry->desc != nullptr ? entry->desc : "";
        const std::string key = "error message = '";
        const size_t begin = desc.find(key);
        if (begin == std::string::npos) return 0;
        const size_t end = desc.find('\'', begin + key.size());
        *static_cast<std::string*>(out) = desc.substr(begin + key.size(), end - begin - key.size());
        return 1;  // the innermost one is enough
      },
      &text);
  return text;
}

}  // namespace

void throw_h5_error(const char* call, const char* file, int line) {
  const std::string os = system_error_text();
  // The failure is ours to report now. A stack left behind on a thread that ends (the
  // checkpoint writer's) keeps HDF5's error classes referenced, and the library's teardown
  // at exit then loops ("HDF5: infinite loop closing library") and leaks.
  H5Eclear2(H5E_DEFAULT);
  // "rank N: " in a job of several ranks only (hpctrain-data and one-rank runs have none).
  const std::string rank = log_names_rank() ? "rank " + std::to_string(log_rank()) + ": " : "";
  throw H5Error(rank + "HDF5 call failed: " + call + " (" +
                    std::filesystem::path(file).filename().string() + ":" + std::to_string(line) +
                    ")" + (os.empty() ? "" : ": " + os),
                os);
}

void h5_no_cleanup_at_exit() { H5dont_atexit(); }

void h5_quiet() {
  // Our Error already names the call; HDF5's stack dump would add dozens of lines per
  // failure, and per rank. Setting the same (null) handler again is harmless.
  HT_CHECK_H5(H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr));
}

H5Handle h5_float16_type() {
  // Start from float32 LE and shrink it: sign bit 15, exponent bits 10-14 (bias 15),
  // mantissa bits 0-9. Fields are set before the size so they always fit.
  H5Handle t(HT_CHECK_H5(H5Tcopy(H5T_IEEE_F32LE)), H5Tclose);
  HT_CHECK_H5(H5Tset_fields(t.get(), 15, 10, 5, 0, 10));
  HT_CHECK_H5(H5Tset_size(t.get(), 2));
  HT_CHECK_H5(H5Tset_ebias(t.get(), 15));
  return t;
}

H5Handle h5_unlocked_access() {
  H5Handle fapl(HT_CHECK_H5(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
#if H5_VERSION_GE(1, 10, 7)
  // use_file_locking = false; ignore_when_disabled = true.
  HT_CHECK_H5(H5Pset_file_locking(fapl.get(), false, true));
#endif
  return fapl;
}

H5Handle h5_large_attribute_access() {
  H5Handle fapl = h5_unlocked_access();
  HT_CHECK_H5(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18));
  return fapl;
}

H5Handle h5_untimed_creation() {
  H5Handle fcpl(HT_CHECK_H5(H5Pcreate(H5P_FILE_CREATE)), H5Pclose);
  HT_CHECK_H5(H5Pset_obj_track_times(fcpl.get(), false));
  return fcpl;
}

H5Handle h5_open_read_only(const std::string& path) {
  const H5Handle fapl = h5_unlocked_access();
  return H5Handle(HT_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get())), H5Fclose);
}

int h5_descriptor(hid_t file) {
  void* handle = nullptr;
  const hid_t access = H5Fget_access_plist(file);
  const bool sec2 = access >= 0 && H5Pget_driver(access) == H5FD_SEC2;
  if (access >= 0) H5Pclose(access);
  const bool got = sec2 && H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) >= 0 && handle != nullptr;
  H5Eclear2(H5E_DEFAULT);
  return got ? *static_cast<int*>(handle) : -1;
}

namespace {

// Whether `file` (a path to try) opens and holds a dataset `dataset`; "." is `self`.
bool source_opens(const std::string& file, const std::string& dataset, hid_t self) {
  hid_t f = self;
  if (file != ".") {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return false;
    // with the virtual dataset's file's access properties, as HDF5 opens its sources
    H5Handle fapl(HT_CHECK_H5(H5Fget_access_plist(self)), H5Pclose);
    f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get());
    if (f < 0) return false;
  }
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  if (d >= 0) H5Dclose(d);
  if (f != self) H5Fclose(f);
  return d >= 0;
}

}  // namespace

std::string h5_missing_virtual_source(hid_t dataset, const std::string& file_path) {
  namespace fs = std::filesystem;
  H5Handle dcpl(HT_CHECK_H5(H5Dget_create_plist(dataset)), H5Pclose);
  if (HT_CHECK_H5(H5Pget_layout(dcpl.get())) != H5D_VIRTUAL) return {};
  const H5Handle self(HT_CHECK_H5(H5Iget_file_id(dataset)), H5Fclose);
  fs::path origin = fs::path(file_path).parent_path();
  if (origin.empty()) origin = ".";
  // where a relative name (or an absolute one's file name, when it is missing) is looked for
  std::vector<fs::path> dirs;
  if (const char* prefix = std::getenv("HDF5_VDS_PREFIX"); prefix != nullptr) {
    const std::string list = prefix;
    for (size_t start = 0; start <= list.size();) {
      const size_t end = std::min(list.find(':', start), list.size());
      std::string dir = list.substr(start, end - start);
      // HDF5 1.10 replaces ${ORIGIN} only where the whole variable starts with it: in the
      // first directory; elsewhere it is a directory of that name.
      if (start == 0 && dir.rfind("${ORIGIN}", 0) == 0) dir.replace(0, 9, origin.string());
      if (!dir.empty()) dirs.emplace_back(dir);
      start = end + 1;
    }
  }
  dirs.push_back(origin);
  dirs.emplace_back();                                    // the working directory
  std::set<std::pair<std::string, std::string>> checked;  // many mappings share a source
  size_t count = 0;
  HT_CHECK_H5(H5Pget_virtual_count(dcpl.get(), &count));
  for (size_t i = 0; i < count; ++i) {
    const auto text = [&](auto get) {
      std::string out(static_cast<size_t>(HT_CHECK_H5(get(dcpl.get(), i, nullptr, 0))) + 1, '\0');
      HT_CHECK_H5(get(dcpl.get(), i, out.data(), out.size()));
      out.pop_back();
      return out;
    };
    const std::string file = text(H5Pget_virtual_filename);
    const std::string name = text(H5Pget_virtual_dsetname);
    if (file.find('%') != std::string::npos || name.find('%') != std::string::npos ||
        !checked.emplace(file, name).second) {
      continue;
    }
    const fs::path source(file);
    const fs::path tail = source.is_absolute() ? source.filename() : source;
    const bool found = file == "."
                           ? source_opens(file, name, self.get())
                           : (source.is_absolute() && source_opens(file, name, self.get())) ||
                                 std::any_of(dirs.begin(), dirs.end(), [&](const fs::path& d) {
                                   return source_opens((d / tail).string(), name, self.get());
                                 });
    if (!found) return file + ":" + name;
  }
  return {};
}

std::string h5_short_external_storage(hid_t dataset, const std::string& file_path) {
  namespace fs = std::filesystem;
  H5Handle dcpl(HT_CHECK_H5(H5Dget_create_plist(dataset)), H5Pclose);
  const int count = HT_CHECK_H5(H5Pget_external_count(dcpl.get()));
  if (count <= 0) return {};
  // Where HDF5 looks for a relative name: $HDF5_EXTFILE_PREFIX, else the dataset access
  // property's prefix (${ORIGIN} at its start: the data file's directory), else the working
  // directory.
  std::string prefix;
  if (const char* env = std::getenv("HDF5_EXTFILE_PREFIX"); env != nullptr && *env != '\0') {
    prefix = env;
  } else {
    H5Handle dapl(HT_CHECK_H5(H5Dget_access_plist(dataset)), H5Pclose);
    prefix.assign(static_cast<size_t>(HT_CHECK_H5(H5Pget_efile_prefix(dapl.get(), nullptr, 0))),
                  '\0');
    if (!prefix.empty()) {
      std::vector<char> text(prefix.size() + 1);
      HT_CHECK_H5(H5Pget_efile_prefix(dapl.get(), text.data(), text.size()));
      prefix = text.data();
    }
  }
  if (prefix.rfind("${ORIGIN}", 0) == 0) {
    const fs::path origin = fs::path(file_path).parent_path();
    prefix.replace(0, 9, origin.empty() ? "." : origin.string());
  }
  // The bytes the dataset's elements take, which its segments hold in order.
  H5Handle space(HT_CHECK_H5(H5Dget_space(dataset)), H5Sclose);
  H5Handle type(HT_CHECK_H5(H5Dget_type(dataset)), H5Tclose);
  uint64_t left = static_cast<uint64_t>(HT_CHECK_H5(H5Sget_simple_extent_npoints(space.get()))) *
                  H5Tget_size(type.get());
  std::vector<char> name(4096);
  for (int i = 0; i < count && left > 0; ++i) {
    off_t offset = 0;
    hsize_t size = 0;
    HT_CHECK_H5(H5Pget_external(dcpl.get(), static_cast<unsigned>(i), name.size(), name.data(),
                                &offset, &size));
    const fs::path segment(name.data());
    const fs::path where = segment.is_absolute() || prefix.empty() || prefix == "."
                               ? segment
                               : fs::path(prefix) / segment;
    const uint64_t part = size == H5F_UNLIMITED ? left : std::min<uint64_t>(left, size);
    std::error_code ec;
    const uint64_t bytes = fs::file_size(where, ec);
    if (ec) return where.string() + ": " + ec.message();
    if (bytes < static_cast<uint64_t>(offset) + part) {
      return where.string() + " holds " + std::to_string(bytes) + " bytes, fewer than the " +
             std::to_string(static_cast<uint64_t>(offset) + part) +
             " its part of the dataset needs";
    }
    left -= part;
  }
  return {};
}

namespace {

// Returns the strings of a variable-length string attribute, freeing HDF5's buffers
// even if copying them throws.
std::vector<std::string> read_variable_strings(hid_t attribute, hid_t file_type, hid_t space,
                                               size_t n) {
  H5Handle mem_type(HT_CHECK_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
  HT_CHECK_H5(H5Tset_size(mem_type.get(), H5T_VARIABLE));
  const H5T_cset_t cset = HT_CHECK_H5(H5Tget_cset(file_type));  // ASCII or UTF-8, as stored
  HT_CHECK_H5(H5Tset_cset(mem_type.get(), cset));
  std::vector<char*> raw(n, nullptr);
  HT_CHECK_H5(H5Aread(attribute, mem_type.get(), raw.data()));
  struct Reclaim {
    hid_t type, space;
    std::vector<char*>* raw;
    ~Reclaim() {
#if H5_VERSION_GE(1, 12, 0)
      H5Treclaim(type, space, H5P_DEFAULT, raw->data());
#else
      H5Dvlen_reclaim(type, space, H5P_DEFAULT, raw->data());
#endif
    }
  } reclaim{mem_type.get(), space, &raw};
  std::vector<std::string> out;
  out.reserve(n);
  for (char* s : raw) out.emplace_back(s != nullptr ? s : "");
  return out;
}

std::vector<std::string> read_fixed_strings(hid_t attribute, hid_t file_type, size_t n) {
  const size_t size = H5Tget_size(file_type);
  if (size == 0) throw_h5_error("H5Tget_size(file_type)", __FILE__, __LINE__);
  const H5T_str_t pad = HT_CHECK_H5(H5Tget_strpad(file_type));
  std::vector<char> raw(n * size);
  // The file type itself is a valid memory type for fixed strings: a plain copy.
  HT_CHECK_H5(H5Aread(attribute, file_type, raw.data()));
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string s(raw.data() + i * size, size);
    s.resize(s.find('\0') == std::string::npos ? size : s.find('\0'));
    if (pad == H5T_STR_SPACEPAD) s.erase(s.find_last_not_of(' ') + 1);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

namespace {

// A numeric attribute: scalar when `count` is negative, else 1-D of `count` values.
void write_numbers(hid_t loc, const char* name, hid_t file_type, hid_t memory_type,
                   const void* values, int64_t count) {
  const hsize_t n[1] = {static_cast<hsize_t>(std::max<int64_t>(count, 0))};
  H5Handle space(HT_CHECK_H5(count < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, n, nullptr)),
                 H5Sclose);
  H5Handle attr(
      HT_CHECK_H5(H5Acreate2(loc, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT)),
      H5Aclose);
  HT_CHECK_H5(H5Awrite(attr.get(), memory_type, values));
}

}  // namespace

void h5_write_int(hid_t loc, const char* name, int64_t value) {
  write_numbers(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, -1);
}

void h5_write_ints(hid_t loc, const char* name, const std::vector<int64_t>& values) {
  write_numbers(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, values.data(),
                static_cast<int64_t>(values.size()));
}

void h5_write_double(hid_t loc, const char* name, double value) {
  write_numbers(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, -1);
}

void h5_write_doubles(hid_t loc, const char* name, const std::vector<double>& values) {
  write_numbers(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, values.data(),
                static_cast<int64_t>(values.size()));
}

void h5_write_strings(hid_t loc, const char* name, const std::vector<std::string>& values,
                      bool scalar) {
  // Variable-length UTF-8 strings, as h5py writes Python str, so h5py reads back str.
  H5Handle type(HT_CHECK_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
  HT_CHECK_H5(H5Tset_size(type.get(), H5T_VARIABLE));
  HT_CHECK_H5(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  const hsize_t n[1] = {values.size()};
  H5Handle space(
      scalar ? HT_CHECK_H5(H5Screate(H5S_SCALAR)) : HT_CHECK_H5(H5Screate_simple(1, n, nullptr)),
      H5Sclose);
  H5Handle attr(
      HT_CHECK_H5(H5Acreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT)),
      H5Aclose);
  std::vector<const char*> pointers;
  for (const std::string& v : values) pointers.push_back(v.c_str());
  HT_CHECK_H5(H5Awrite(attr.get(), type.get(), pointers.data()));
}

std::vector<std::string> h5_read_strings(hid_t attribute, const std::string& what) {
  H5Handle file_type(HT_CHECK_H5(H5Aget_type(attribute)), H5Tclose);
  if (HT_CHECK_H5(H5Tget_class(file_type.get())) != H5T_STRING) {
    throw UsageError(what + " is not a string attribute");
  }
  H5Handle space(HT_CHECK_H5(H5Aget_space(attribute)), H5Sclose);
  if (HT_CHECK_H5(H5Sget_simple_extent_ndims(space.get())) > 1) {
    throw UsageError(what + " has more than one dimension, expected a list of strings");
  }
  const auto n = static_cast<size_t>(HT_CHECK_H5(H5Sget_simple_extent_npoints(space.get())));
  if (n == 0) return {};
  if (HT_CHECK_H5(H5Tis_variable_str(file_type.get())) > 0) {
    return read_variable_strings(attribute, file_type.get(), space.get(), n);
  }
  return read_fixed_strings(attribute, file_type.get(), n);
}

bool h5_threadsafe() {
  hbool_t safe = 0;
  return H5is_library_threadsafe(&safe) >= 0 && safe != 0;
}

}  // namespace hpctrain
