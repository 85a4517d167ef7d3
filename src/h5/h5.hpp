// RAII for HDF5 identifiers and the one check macro for HDF5 calls.
// HDF5's own error stack printing is switched off (h5_quiet) so that a failure
// becomes one line from our Error, naming the call, file and line.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/crash_note.hpp"
#include "core/error.hpp"

namespace hpctrain {

// A failed HDF5 call: "rank R: HDF5 call failed: CALL (file:line)", followed by ": " and
// the operating system's error text (e.g. "No space left on device") when HDF5 recorded
// one, which os_error() also gives (empty when the failure was the library's own: a
// damaged or unsupported file, for example).
class H5Error : public Error {
 public:
  H5Error(const std::string& what, std::string os_error)
      : Error(what), os_error_(std::move(os_error)) {}
  const std::string& os_error() const { return os_error_; }

 private:
  std::string os_error_;
};

// Throws H5Error for CALL at file:line.
[[noreturn]] void throw_h5_error(const char* call, const char* file, int line);

// Keeps HDF5 from closing, at exit, the files still open then. Every file the programs open
// is closed by its handle, so the only one left is one whose close failed (a full disk at
// a checkpoint's write), and HDF5 1.10 crashes closing that one again at exit (SIGSEGV in
// H5F__close_cb instead of the program's exit 1). Call it first in main, before any other
// HDF5 call.
void h5_no_cleanup_at_exit();

// Turns off HDF5's automatic error-stack printing (idempotent). A thread-safe HDF5 (Debian's)
// keeps this setting per thread: every thread that calls HDF5 must call it.
void h5_quiet();

// Runs `read`, which reads the file at `path` through HDF5, and gives its result. A failed
// HDF5 call that the operating system did not cause means the file's contents are damaged
// or unsupported: bad input, so UsageError naming the file (exit 2); one it did cause (an
// I/O error) stays an Error (exit 1), also naming the file. A fatal signal meanwhile (HDF5
// crashes on some damaged files) names the file too (core/crash_note.hpp). HDF5's own
// printing is off for the calling thread (h5_quiet), which may be a prefetch thread.
template <typename Read>
auto h5_reading(const std::string& path, Read&& read) -> decltype(read()) {
  const CrashNote note(path);
  try {
    h5_quiet();
    return read();
  } catch (const H5Error& e) {
    if (e.os_error().empty()) {
      throw UsageError(path + ": damaged or unsupported HDF5 data (" + e.what() + ")");
    }
    throw Error(path + ": cannot read: " + e.what());
  }
}

template <typename T>
T check_h5(T result, const char* call, const char* file, int line) {
  if (result < 0) throw_h5_error(call, file, line);
  return result;
}

// Owns one hid_t and closes it with the matching H5*close. Move-only.
// Not thread-safe (neither is the serial HDF5 library).
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  H5Handle& operator=(H5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      closer_ = other.closer_;
    }
    return *this;
  }
  ~H5Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);  // destructors never throw
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// The format's float16 type: IEEE binary16, little-endian, built the way h5py builds it
// (so h5py and numpy read it as float16). Used as both file and memory type, so reads
// copy raw bits and half.hpp does the conversion.
H5Handle h5_float16_type();

// A file access property list with HDF5's file locking off where the library allows it.
// Every file hpctrain writes is written once, under a temporary name, and renamed into
// place, so the lock guards nothing; and many parallel file systems (Lustre mounted
// without flock) make a locking open or create fail. The same list everywhere also lets
// HDF5 share a file that one part of a run has open with another (a data file given as a
// checkpoint is then refused as such, not as "not a readable HDF5 file").
H5Handle h5_unlocked_access();
// The same for a file that may hold an attribute above 64 KiB (a vocabulary, a list of
// names): written in the HDF5 1.8 format, whose dense attribute storage has no such limit
// (the default, earliest format refuses it); readable by HDF5 1.8 and later.
H5Handle h5_large_attribute_access();
// A file-creation property list whose root group keeps no times (HDF5 stores access,
// change and birth times in its header otherwise): the same writes give the same bytes.
H5Handle h5_untimed_creation();

// Opens an existing file read-only with h5_unlocked_access().
H5Handle h5_open_read_only(const std::string& path);

// The descriptor HDF5 reads and writes `file` through: its sec2 driver's handle (the
// default); -1 for another driver (one chosen by HDF5_DRIVER has handles of its own).
int h5_descriptor(hid_t file);

// The first source of virtual dataset `dataset` (of the file at `file_path`) that cannot be
// opened, as "FILE:DATASET"; empty when `dataset` is not virtual or every source opens.
// HDF5 reads a missing source's rows as the fill value without a word. Sources are looked
// for where HDF5 looks: an absolute name as given, then each directory of $HDF5_VDS_PREFIX
// (${ORIGIN}: the virtual dataset's directory), the virtual dataset's directory and the
// working directory. Names with a printf-style pattern (unlimited mappings) are skipped.
std::string h5_missing_virtual_source(hid_t dataset, const std::string& file_path);

// What is wrong with the external raw files (H5Pset_external) of `dataset` (of the file at
// `file_path`): one missing, or shorter than the part of the dataset it holds, which HDF5
// reads as zeros without a word; empty when it has none or they hold it all. A relative name
// is looked for where HDF5 looks: under $HDF5_EXTFILE_PREFIX, else the dataset's
// external-file prefix (a leading ${ORIGIN}: the file's directory), else the working directory.
std::string h5_short_external_storage(hid_t dataset, const std::string& file_path);

// Whether the HDF5 library serialises calls from several threads itself.
bool h5_threadsafe();

// Writes attribute `name` on `loc` as a scalar little-endian int64 or float64, or as a 1-D
// array of them (an existing attribute of that name is an error).
void h5_write_int(hid_t loc, const char* name, int64_t value);
void h5_write_ints(hid_t loc, const char* name, const std::vector<int64_t>& values);
void h5_write_double(hid_t loc, const char* name, double value);
void h5_write_doubles(hid_t loc, const char* name, const std::vector<double>& values);

// Writes attribute `name` on `loc` as variable-length UTF-8 strings (as h5py writes
// Python str): a scalar when `scalar` (values must hold one string), else 1-D.
void h5_write_strings(hid_t loc, const char* name, const std::vector<std::string>& values,
                      bool scalar);

// Reads a string attribute (scalar or 1-D; variable- or fixed-length) as strings.
// Throws UsageError naming `what` (e.g. "FILE: attribute class_names") if it is not a string.
std::vector<std::string> h5_read_strings(hid_t attribute, const std::string& what);

}  // namespace hpctrain

// Checks an HDF5 call that returns a negative value (herr_t or hid_t) on failure;
// evaluates to the call's value.
#define HT_CHECK_H5(call) ::hpctrain::check_h5((call), #call, __FILE__, __LINE__)
