// Checkpoint files. Layout:
//   /                 attributes: format = "hpctrain-checkpoint", format_version,
//                     step, epoch, step_in_epoch, steps_per_epoch, global_batch,
//                     world_size, strategy, config_yaml, architecture, created
//   /arrays/<name>    float32 [n], attribute crc32c (CRC-32C of the bytes)
// Arrays are stored contiguous (no chunking): one sequential write each. From format
// version 2 the file ends in a whole-file checksum (checkpoint_footer.hpp), verified before
// the HDF5 library parses the file.
#include "checkpoint/checkpoint_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "checkpoint/checkpoint_footer.hpp"
#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "h5/h5.hpp"

namespace hpctrain {
namespace {

constexpr const char* kFormatName = "hpctrain-checkpoint";

uint32_t crc_of(const std::vector<float>& v) { return crc32c(v.data(), v.size() * sizeof(float)); }

int64_t read_int(hid_t loc, const char* name) {
  if (HT_CHECK_H5(H5Aexists(loc, name)) <= 0) {
    throw UsageError(std::string("attribute '") + name + "' is missing");
  }
  H5Handle attr(HT_CHECK_H5(H5Aopen(loc, name, H5P_DEFAULT)), H5Aclose);
  // HDF5 converts any integer; a string or several values failed the read without a name.
  H5Handle type(HT_CHECK_H5(H5Aget_type(attr.get())), H5Tclose);
  H5Handle space(HT_CHECK_H5(H5Aget_space(attr.get())), H5Sclose);
  if (H5Tget_class(type.get()) != H5T_INTEGER ||
      HT_CHECK_H5(H5Sget_simple_extent_npoints(space.get())) != 1) {
    throw UsageError(std::string("attribute '") + name + "' is not one integer");
  }
  int64_t value = 0;
  HT_CHECK_H5(H5Aread(attr.get(), H5T_NATIVE_INT64, &value));
  return value;
}

std::string read_string(hid_t loc, const char* name) {
  if (HT_CHECK_H5(H5Aexists(loc, name)) <= 0) {
    throw UsageError(std::string("attribute '") + name + "' is missing");
  }
  H5Handle attr(HT_CHECK_H5(H5Aopen(loc, name, H5P_DEFAULT)), H5Aclose);
  const std::vector<std::string> v = h5_read_strings(attr.get(), name);
  if (v.size() != 1) throw UsageError(std::string("attribute '") + name + "' is not one string");
  return v[0];
}

void write_array(hid_t file, const std::string& name, const std::vector<float>& data) {
  H5Handle lcpl(HT_CHECK_H5(H5Pcreate(H5P_LINK_CREATE)), H5Pclose);
  HT_CHECK_H5(H5Pset_create_intermediate_group(lcpl.get(), 1));
  const hsize_t dims[1] = {data.size()};
  H5Handle space(HT_CHECK_H5(H5Screate_simple(1, dims, nullptr)), H5Sclose);
  const std::string path = "/arrays/" + name;
  H5Handle dset(HT_CHECK_H5(H5Dcreate2(file, path.c_str(), H5T_IEEE_F32LE, space.get(), lcpl.get(),
                                       H5P_DEFAULT, H5P_DEFAULT)),
                H5Dclose);
  if (!data.empty()) {
    HT_CHECK_H5(H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()));
  }
  H5Handle aspace(HT_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose);
  H5Handle attr(HT_CHECK_H5(H5Acreate2(dset.get(), "crc32c", H5T_STD_U32LE, aspace.get(),
                                       H5P_DEFAULT, H5P_DEFAULT)),
                H5Aclose);
  const uint32_t crc = crc_of(data);
  HT_CHECK_H5(H5Awrite(attr.get(), H5T_NATIVE_UINT32, &crc));
}

// Collects the names of all datasets below /arrays (visiting nested groups).
herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* out) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

struct ArrayRead {
  std::vector<float> data;
  uint32_t stored_crc = 0, actual_crc = 0;
};

// Reads one array of a file of `file_bytes` bytes. A header that claims more floats than
// the file holds (a faulty or hostile writer: the checksums can match) is refused before
// any memory is reserved for them.
ArrayRead read_array(hid_t arrays, const std::string& name, uint64_t file_bytes) {
  H5Handle dset(HT_CHECK_H5(H5Dopen2(arrays, name.c_str(), H5P_DEFAULT)), H5Dclose);
  H5Handle space(HT_CHECK_H5(H5Dget_space(dset.get())), H5Sclose);
  if (HT_CHECK_H5(H5Sget_simple_extent_ndims(space.get())) != 1) {
    throw UsageError("array '" + name + "' is not one-dimensional");
  }
  hsize_t n = 0;
  HT_CHECK_H5(H5Sget_simple_extent_dims(space.get(), &n, nullptr));
  if (n > file_bytes / sizeof(float)) {
    throw UsageError("array '" + name + "' claims " + std::to_string(n) +
                     " floats, more than the file's " + std::to_string(file_bytes) +
                     " bytes hold (corrupt)");
  }
  ArrayRead r;
  r.data.resize(static_cast<size_t>(n));
  if (n > 0) {
    HT_CHECK_H5(
        H5Dread(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.data.data()));
  }
  if (HT_CHECK_H5(H5Aexists(dset.get(), "crc32c")) <= 0) {
    throw UsageError("array '" + name + "' has no crc32c attribute");
  }
  H5Handle attr(HT_CHECK_H5(H5Aopen(dset.get(), "crc32c", H5P_DEFAULT)), H5Aclose);
  HT_CHECK_H5(H5Aread(attr.get(), H5T_NATIVE_UINT32, &r.stored_crc));
  r.actual_crc = crc_of(r.data);
  return r;
}

// The size of the open file, for read_array.
uint64_t open_file_bytes(hid_t file) {
  hsize_t size = 0;
  HT_CHECK_H5(H5Fget_filesize(file, &size));
  return size;
}

std::vector<std::string> array_names(hid_t file) {
  std::vector<std::string> names;
  if (HT_CHECK_H5(H5Lexists(file, "arrays", H5P_DEFAULT)) <= 0) return names;
  H5Handle arrays(HT_CHECK_H5(H5Gopen2(file, "arrays", H5P_DEFAULT)), H5Gclose);
  HT_CHECK_H5(H5Ovisit(arrays.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &names));
  return names;
}

// Opens a checkpoint for reading after its whole-file checksum, if it has one, matched;
// *footer says which. Contents that are not a checkpoint's are a UsageError naming the file;
// a file the system cannot open or read (EACCES, EIO) is an Error naming it and the reason:
// nothing says its contents are bad, so --resume auto must not skip it for an older one.
H5Handle open_checkpoint(const std::string& path, Footer* footer = nullptr) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) {
    throw UsageError(path + ": no such checkpoint");
  }
  if (ec) throw Error(path + ": cannot open: " + ec.message());
  if (!std::filesystem::is_regular_file(status)) {  // a FIFO would block the read
    throw UsageError(path + ": not a regular file");
  }
  const Footer f = verify_checksum_footer(path);
  if (footer != nullptr) *footer = f;
  h5_quiet();
  hid_t id = H5I_INVALID_HID;
  {
    const H5Handle fapl = h5_unlocked_access();
    id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  }
  if (id < 0) throw UsageError(path + ": not a readable HDF5 file (truncated or corrupt?)");
  H5Handle file(id, H5Fclose);
  if (HT_CHECK_H5(H5Aexists(file.get(), "format")) <= 0) {
    const bool data = HT_CHECK_H5(H5Lexists(file.get(), "images", H5P_DEFAULT)) > 0 ||
                      HT_CHECK_H5(H5Lexists(file.get(), "tokens", H5P_DEFAULT)) > 0;
    throw UsageError(path + ": not an hpctrain checkpoint (no 'format' attribute" +
                     (data ? "; a data file" : "") + ")");
  }
  if (read_string(file.get(), "format") != kFormatName) {
    throw UsageError(path + ": not an hpctrain checkpoint");
  }
  return file;
}

// A cursor no writer makes (docs/formats.md: epoch = step / steps_per_epoch, step_in_epoch
// = step % steps_per_epoch), or one whose figures a resume cannot compute with (an epoch
// past train.epochs' range; an epoch's samples, steps x global batch, past int64; more
// ranks than an int counts): the checksums of a file another tool wrote match all the same.
void check_cursor(const CheckpointState& s, int64_t world_size) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const bool ok = s.steps_per_epoch >= 1 && s.global_batch >= 1 && world_size >= 1 &&
                  world_size <= std::numeric_limits<int>::max() && s.epoch >= 0 &&
                  s.epoch <= std::numeric_limits<int>::max() && s.step_in_epoch >= 0 &&
                  s.step_in_epoch < s.steps_per_epoch &&
                  s.global_batch <= kMax / s.steps_per_epoch &&
                  s.epoch <= (kMax - s.step_in_epoch) / s.steps_per_epoch &&
                  s.step == s.epoch * s.steps_per_epoch + s.step_in_epoch;
  if (!ok) {
    throw UsageError("inconsistent cursor: step " + std::to_string(s.step) + ", epoch " +
                     std::to_string(s.epoch) + ", step_in_epoch " +
                     std::to_string(s.step_in_epoch) + ", steps_per_epoch " +
                     std::to_string(s.steps_per_epoch) + ", global_batch " +
                     std::to_string(s.global_batch) + ", world_size " + std::to_string(world_size));
  }
}

std::string describe_error(const std::string& path, const std::exception& e) {
  const std::string what = e.what();
  return what.rfind(path, 0) == 0 ? what : path + ": " + what;
}

}  // namespace

std::vector<float> shared_array(const CheckpointState& s, const std::string& name,
                                const std::string& path) {
  if (auto it = s.arrays.find(name); it != s.arrays.end()) return it->second;
  std::vector<double> sum;
  int ranks = 0;
  for (;; ++ranks) {
    const auto it = s.arrays.find(rank_array_name(ranks, name));
    if (it == s.arrays.end()) break;
    if (ranks == 0) sum.assign(it->second.size(), 0.0);
    if (it->second.size() != sum.size()) {
      throw UsageError(path + ": the ranks' " + name + " arrays differ in length");
    }
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += it->second[i];
  }
  std::vector<float> mean(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / ranks);
  return mean;
}

std::string rank_array_name(int rank, const std::string& name) {
  std::string out;
  rank_array_name(rank, name, out);
  return out;
}

void rank_array_name(int rank, std::string_view name, std::string& out) {
  char prefix[32];
  const int n = std::snprintf(prefix, sizeof(prefix), "rank%05d/", rank);
  out.assign(prefix, static_cast<size_t>(n));
  out.append(name);
}

std::vector<float>& CheckpointState::array(std::string_view name) {
  const auto it = arrays.find(name);
  return it != arrays.end() ? it->second : arrays[std::string(name)];
}

size_t CheckpointState::bytes() const {
  size_t n = 0;
  for (const auto& [name, v] : arrays) n += v.size() * sizeof(float);
  return n;
}

namespace {

// The HDF5 part of a checkpoint, at `temp` (created exclusively).
void write_hdf5(const std::string& temp, const CheckpointState& state) {
  {
    const H5Handle fapl = h5_unlocked_access();
    H5Handle file(HT_CHECK_H5(H5Fcreate(temp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get())),
                  H5Fclose);
    const hid_t root = file.get();
    h5_write_strings(root, "format", {kFormatName}, true);
    h5_write_int(root, "format_version", CheckpointState::kFormatVersion);
    h5_write_int(root, "step", state.step);
    h5_write_int(root, "epoch", state.epoch);
    h5_write_int(root, "step_in_epoch", state.step_in_epoch);
    h5_write_int(root, "steps_per_epoch", state.steps_per_epoch);
    h5_write_int(root, "global_batch", state.global_batch);
    h5_write_int(root, "world_size", state.world_size);
    h5_write_strings(root, "strategy", {state.strategy}, true);
    h5_write_strings(root, "config_yaml", {state.config_yaml}, true);
    h5_write_strings(root, "architecture", {state.architecture}, true);
    h5_write_strings(root, "created", {state.created}, true);
    for (const auto& [name, data] : state.arrays) write_array(root, name, data);
    HT_CHECK_H5(H5Fflush(root, H5F_SCOPE_GLOBAL));
  }
}

}  // namespace

void write_checkpoint_file(const std::string& path, const CheckpointState& state,
                           const std::function<void()>& before_commit) {
  h5_quiet();
  const std::string temp = path + ".tmp";
  // Created exclusively (O_EXCL: a symbolic link at the path is not followed, the create
  // fails) after removing what an interrupted write left there.
  remove_temporary(temp);
  try {
    write_hdf5(temp, state);
    append_checksum_footer(temp);
    if (before_commit) before_commit();
    commit_file(temp, path);
  } catch (const DirectorySyncError& e) {  // the file is in place under `path`
    throw DirectorySyncError(path + ": written, but syncing its directory failed: " + e.what());
  } catch (const Error& e) {
    // A full disk or a failing file system (at the write, or first at the fsync): no
    // partial file is left to trip a later resume, and the message says which file and why
    // (the call and the system's error).
    ::unlink(temp.c_str());
    throw Error(path + ": cannot write the checkpoint: " + e.what());
  }
}

CheckpointState read_checkpoint_file(const std::string& path) {
  const CrashNote note(path);
  try {
    Footer footer = Footer::kAbsent;
    H5Handle file = open_checkpoint(path, &footer);
    const hid_t root = file.get();
    CheckpointState s;
    s.format_version = static_cast<int>(read_int(root, "format_version"));
    if (s.format_version > CheckpointState::kFormatVersion) {
      throw NewerCheckpointError("format version " + std::to_string(s.format_version) +
                                 " is newer than this hpctrain reads (" +
                                 std::to_string(CheckpointState::kFormatVersion) + ")");
    }
    if (s.format_version >= 2 && footer != Footer::kValid) {
      throw UsageError("format version " + std::to_string(s.format_version) +
                       " without its whole-file checksum (corrupt)");
    }
    s.step = read_int(root, "step");
    s.epoch = read_int(root, "epoch");
    s.step_in_epoch = read_int(root, "step_in_epoch");
    s.steps_per_epoch = read_int(root, "steps_per_epoch");
    s.global_batch = read_int(root, "global_batch");
    const int64_t world_size = read_int(root, "world_size");
    check_cursor(s, world_size);
    s.world_size = static_cast<int>(world_size);
    s.strategy = read_string(root, "strategy");
    s.config_yaml = read_string(root, "config_yaml");
    s.architecture = read_string(root, "architecture");
    s.created = read_string(root, "created");
    H5Handle arrays(HT_CHECK_H5(H5Gopen2(root, "arrays", H5P_DEFAULT)), H5Gclose);
    for (const std::string& name : array_names(root)) {
      ArrayRead a = read_array(arrays.get(), name, open_file_bytes(root));
      if (a.stored_crc != a.actual_crc) {
        throw UsageError("array '" + name + "' fails its CRC-32C check (corrupt)");
      }
      // hpctrain never writes such parameters (async_writer.cpp); nothing could train on.
      if (name.ends_with(kParamsArray) &&
          !std::all_of(a.data.begin(), a.data.end(), [](float v) { return std::isfinite(v); })) {
        throw UsageError("array '" + name + "' holds values that are not finite");
      }
      s.arrays[name] = std::move(a.data);
    }
    if (s.arrays.count(kParamsArray) == 0 &&
        s.arrays.count(rank_array_name(0, kParamsArray)) == 0) {
      throw UsageError("no model parameters in the checkpoint");
    }
    return s;
  } catch (const NewerCheckpointError& e) {
    throw NewerCheckpointError(describe_error(path, e));
  } catch (const UsageError& e) {
    throw UsageError(describe_error(path, e));
  } catch (const H5Error& e) {
    if (!e.os_error().empty()) throw Error(path + ": cannot read: " + e.what());
    throw UsageError(path + ": unreadable checkpoint (truncated or corrupt?): " + e.what());
  } catch (const Error& e) {
    throw Error(describe_error(path, e));  // the system could not open or read it
  }
}

bool is_checkpoint_file(const std::string& path) {
  const CrashNote note(path);
  try {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec) && ends_in_checksum_footer(path)) {
      return true;
    }
    open_checkpoint(path);
    return true;
  } catch (const Error&) {
    return false;
  }
}

namespace {

// The description of inspect_checkpoint_file; false where a checksum failed.
bool describe_checkpoint(const std::string& path, std::ostream& out) {
  // A file whose checksum matches may still hold HDF5 structures the reader does not
  // expect (written so on purpose): named as bad input, like any other.
  return h5_reading(path, [&] {
    try {
      Footer footer = Footer::kAbsent;
      H5Handle file = open_checkpoint(path, &footer);
      const hid_t root = file.get();
      const int64_t version = read_int(root, "format_version");
      out << path << ": hpctrain checkpoint, format version " << version << "\n";
      out << "  whole-file checksum: "
          << (footer == Footer::kValid ? "ok"
              : version >= 2           ? "MISSING (corrupt)"
                                       : "none (version 1)")
          << "\n";
      const int64_t epoch = read_int(root, "epoch"), in_epoch = read_int(root, "step_in_epoch");
      for (const char* key :
           {"step", "epoch", "step_in_epoch", "steps_per_epoch", "global_batch", "world_size"}) {
        const int64_t value = read_int(root, key);
        out << "  " << key << ": " << value;
        // The attribute is the epochs completed; messages (the log, metrics.csv, eval)
        // count epochs from 1, as the loaded-checkpoint line does.
        if (std::string(key) == "epoch") {
          out << (in_epoch == 0 ? " (the end of epoch " + std::to_string(epoch) + ")"
                                : " (step " + std::to_string(in_epoch) + " of epoch " +
                                      std::to_string(epoch + 1) + ")");
        }
        out << "\n";
      }
      out << "  strategy: " << read_string(root, "strategy") << "\n";
      out << "  created: " << read_string(root, "created") << "\n";
      out << "  architecture:\n";
      const std::string arch = read_string(root, "architecture");
      size_t start = 0;
      while (start < arch.size()) {
        const size_t end = arch.find('\n', start);
        out << "    " << arch.substr(start, end - start) << "\n";
        if (end == std::string::npos) break;
        start = end + 1;
      }
      bool ok = true;
      out << "  arrays:\n";
      H5Handle arrays(HT_CHECK_H5(H5Gopen2(root, "arrays", H5P_DEFAULT)), H5Gclose);
      for (const std::string& name : array_names(root)) {
        try {
          const ArrayRead a = read_array(arrays.get(), name, open_file_bytes(root));
          const bool good = a.stored_crc == a.actual_crc;
          ok = ok && good;
          char line[256];
          std::snprintf(line, sizeof(line), "    %-32s %12zu floats  crc32c %08x  %s\n",
                        name.c_str(), a.data.size(), a.stored_crc,
                        good ? "ok" : "MISMATCH (corrupt)");
          out << line;
        } catch (const Error& e) {
          ok = false;
          out << "    " << name << ": unreadable: " << e.what() << "\n";
        }
      }
      ok = ok && (footer == Footer::kValid || version < 2);
      out << (ok ? "  checksums: all ok\n" : "  checksums: FAILED\n");
      return ok;
    } catch (const UsageError& e) {  // an attribute of the wrong type or missing
      throw UsageError(describe_error(path, e));
    }
  });
}

}  // namespace

bool inspect_checkpoint_file(const std::string& path, std::ostream& out) {
  if (!describe_checkpoint(path, out)) return false;
  // What train and eval check beyond the checksums, which another tool's file can match all
  // the same: the cursor, the parameters there and finite, a format version it reads.
  try {
    read_checkpoint_file(path);
  } catch (const UsageError& e) {
    const std::string what = e.what(), prefix = path + ": ";
    out << "  train and eval refuse it: "
        << (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what) << "\n";
    return false;
  }
  return true;
}

}  // namespace hpctrain
