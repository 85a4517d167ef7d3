// Checkpoints the system cannot read, and checkpoints whose HDF5 headers claim more than
// the file holds: which is an error that ends the run, and which a corrupt file that
// --resume auto skips for an older one.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/checkpoint_footer.hpp"
#include "checkpoint/checkpoint_store.hpp"
#include "checkpoint_test_helpers.hpp"
#include "core/error.hpp"
#include "h5/h5.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

using checkpoint_test::fresh_dir;
using checkpoint_test::sample_state;

// Reads `dir` with --resume auto's scan in a child process that cannot read the file
// `unreadable` (mode 000; root, which ignores modes, becomes nobody first) and exits 0
// when the scan ends in an Error, printing it, rather than falling back or calling the
// file corrupt.
void scan_without_permission(const std::string& dir, const std::string& unreadable) {
  if (::geteuid() == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
      std::fprintf(stderr, "cannot become nobody\n");
      std::_Exit(5);
    }
  }
  if (::access(unreadable.c_str(), R_OK) == 0) {
    std::fprintf(stderr, "the file is still readable\n");
    std::_Exit(6);
  }
  if (::access(checkpoint_path(dir, 10).c_str(), R_OK) != 0) {
    std::fprintf(stderr, "the test directory %s is not readable by nobody\n", dir.c_str());
    std::_Exit(7);
  }
  try {
    const auto loaded = load_newest_valid(dir);
    std::fprintf(stderr, "fell back to %s\n", loaded ? loaded->path.c_str() : "nothing");
    std::_Exit(3);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "called corrupt: %s\n", e.what());
    std::_Exit(4);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::_Exit(0);
  }
}

// A newest checkpoint that cannot be opened (EACCES here; EIO alike) says nothing about its
// contents: skipping it would restart from an older one, and retention would then delete
// the newer ones. The scan ends in an Error naming the file and the reason; nothing is
// removed.
TEST(CheckpointIo, UnreadableNewestIsAnErrorNotSkipped) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Below the system's temporary directory, which nobody can reach.
  const std::string dir = (fs::temp_directory_path() / "ht_ckpt_io_eacces").string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  for (int64_t step : {10, 20, 30}) {
    write_checkpoint_file(checkpoint_path(dir, step), sample_state(step));
  }
  const std::string newest = checkpoint_path(dir, 30);
  ::chmod(newest.c_str(), 0);
  EXPECT_EXIT(scan_without_permission(dir, newest), ::testing::ExitedWithCode(0),
              "ckpt-000000000030.h5: cannot open: Permission denied");
  for (int64_t step : {10, 20, 30}) EXPECT_TRUE(fs::exists(checkpoint_path(dir, step))) << step;
}

// Writes a checkpoint at `path` with one more array, `name`, whose header claims `n` floats
// that were never written, and a whole-file checksum that matches: a file made so on purpose
// or by a faulty tool, which only the array's claimed size gives away.
void write_with_huge_array(const std::string& path, const std::string& name, hsize_t n) {
  write_checkpoint_file(path, sample_state(20));
  fs::resize_file(path, fs::file_size(path) - kFooterBytes);
  {
    h5_quiet();
    H5Handle file(HT_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), H5Fclose);
    const hsize_t dims[1] = {n};
    H5Handle space(HT_CHECK_H5(H5Screate_simple(1, dims, nullptr)), H5Sclose);
    H5Handle dset(HT_CHECK_H5(H5Dcreate2(file.get(), ("/arrays/" + name).c_str(), H5T_IEEE_F32LE,
                                         space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)),
                  H5Dclose);
    H5Handle aspace(HT_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose);
    H5Handle attr(HT_CHECK_H5(H5Acreate2(dset.get(), "crc32c", H5T_STD_U32LE, aspace.get(),
                                         H5P_DEFAULT, H5P_DEFAULT)),
                  H5Aclose);
    const uint32_t crc = 0;
    HT_CHECK_H5(H5Awrite(attr.get(), H5T_NATIVE_UINT32, &crc));
  }
  append_checksum_footer(path);
}

// An array whose header claims more bytes than the whole file (2^50 floats: no allocation
// can hold them) is refused as corrupt, naming the file and the array, before any memory is
// reserved for it; --resume auto goes on with the older checkpoint.
TEST(CheckpointIo, ArrayLongerThanTheFileIsCorrupt) {
  const std::string dir = fresh_dir("io_huge");
  write_checkpoint_file(checkpoint_path(dir, 10), sample_state(10));
  const std::string path = checkpoint_path(dir, 20);
  write_with_huge_array(path, "huge", hsize_t{1} << 50);
  try {
    read_checkpoint_file(path);
    ADD_FAILURE() << "an array longer than the file was read";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find("array 'huge'"), std::string::npos) << what;
  }
  const auto loaded = load_newest_valid(dir);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.step, 10);
}

// A root attribute of the wrong type (a string where the step goes), in a file whose
// whole-file checksum matches, is named by both readers, after the file: HDF5's failed
// conversion named neither the attribute nor, in inspect, the file.
TEST(CheckpointIo, WrongTypedAttributeIsNamed) {
  const std::string path = checkpoint_path(fresh_dir("io_attr"), 10);
  write_checkpoint_file(path, sample_state(10));
  fs::resize_file(path, fs::file_size(path) - kFooterBytes);
  {
    h5_quiet();
    H5Handle file(HT_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), H5Fclose);
    HT_CHECK_H5(H5Adelete(file.get(), "step"));
    H5Handle type(HT_CHECK_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
    HT_CHECK_H5(H5Tset_size(type.get(), 4));
    H5Handle space(HT_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose);
    H5Handle attr(HT_CHECK_H5(H5Acreate2(file.get(), "step", type.get(), space.get(), H5P_DEFAULT,
                                         H5P_DEFAULT)),
                  H5Aclose);
    HT_CHECK_H5(H5Awrite(attr.get(), type.get(), "oops"));
  }
  append_checksum_footer(path);
  for (const bool inspect : {false, true}) {
    try {
      if (inspect) {
        std::ostringstream out;
        inspect_checkpoint_file(path, out);
      } else {
        read_checkpoint_file(path);
      }
      ADD_FAILURE() << "a string step was read (inspect " << inspect << ")";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what, path + ": attribute 'step' is not one integer") << inspect;
    }
  }
}

}  // namespace
}  // namespace hpctrain
