// What a data file's reader refuses where HDF5 itself would read fill values or zeros
// without a word, or crash: virtual datasets whose sources do not open (moved, renamed, a
// dataset name that is not there), links whose target does not open, external raw files
// shorter than their part, integer types whose bits lie outside their bytes, chunks larger
// than the shape (damaged headers), and a file that changes while it is read.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/usage_error.hpp"
#include "data/dataset_file.hpp"
#include "h5/h5.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using test::expect_usage_error;

constexpr hsize_t kDims[4] = {4, 1, 2, 2};

class DataFileChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    h5_quiet();
    dir_ =
        fs::path(::testing::TempDir()) /
        ("ht_vds_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // A file holding `name` [4, 1, 2, 2] uint8 of `value`.
  void write_source(const fs::path& path, const char* name, uint8_t value) {
    H5Handle file(HT_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)),
                  H5Fclose);
    write_images(file.get(), name, value);
  }

  static void write_images(hid_t file, const char* name, uint8_t value) {
    H5Handle space(HT_CHECK_H5(H5Screate_simple(4, kDims, nullptr)), H5Sclose);
    H5Handle set(HT_CHECK_H5(H5Dcreate2(file, name, H5T_STD_U8LE, space.get(), H5P_DEFAULT,
                                        H5P_DEFAULT, H5P_DEFAULT)),
                 H5Dclose);
    const std::vector<uint8_t> values(16, value);
    HT_CHECK_H5(
        H5Dwrite(set.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  }

  // A data file whose /images maps all of `source_file`:`source_set` ("." is the file
  // itself, which then also holds /raw), with real /labels.
  fs::path write_virtual(const std::string& source_file, const std::string& source_set) {
    const fs::path path = dir_ / "virtual.h5";
    H5Handle file(HT_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)),
                  H5Fclose);
    if (source_file == ".") write_images(file.get(), "raw", 5);
    H5Handle space(HT_CHECK_H5(H5Screate_simple(4, kDims, nullptr)), H5Sclose);
    H5Handle dcpl(HT_CHECK_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
    HT_CHECK_H5(H5Pset_virtual(dcpl.get(), space.get(), source_file.c_str(), source_set.c_str(),
                               space.get()));
    H5Handle images(HT_CHECK_H5(H5Dcreate2(file.get(), "images", H5T_STD_U8LE, space.get(),
                                           H5P_DEFAULT, dcpl.get(), H5P_DEFAULT)),
                    H5Dclose);
    write_labels(file.get());
    return path;
  }

  // /labels [4]: 0, 1, 2, 1.
  static void write_labels(hid_t file) {
    const hsize_t n[1] = {4};
    H5Handle space(HT_CHECK_H5(H5Screate_simple(1, n, nullptr)), H5Sclose);
    H5Handle labels(HT_CHECK_H5(H5Dcreate2(file, "labels", H5T_STD_I32LE, space.get(), H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT)),
                    H5Dclose);
    const int32_t values[4] = {0, 1, 2, 1};
    HT_CHECK_H5(H5Dwrite(labels.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, values));
  }

  // The first pixel of the file's rows, read through the loader's file reader.
  static uint8_t first_pixel(const fs::path& path) {
    const DatasetFile data(path.string());
    std::vector<uint8_t> images(16);
    std::vector<int32_t> labels(4);
    data.read_rows(0, 4, images.data(), labels.data());
    EXPECT_EQ(labels[2], 2);
    return images[0];
  }

  // A file `name` with /labels and, as /images, a link made by `link` (file id, "images").
  template <typename MakeLink>
  fs::path write_linked(const char* name, MakeLink link) {
    const fs::path path = dir_ / name;
    H5Handle file(HT_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)),
                  H5Fclose);
    write_labels(file.get());
    HT_CHECK_H5(link(file.get(), "images"));
    return path;
  }

  fs::path dir_;
};

// A soft link to nothing, or an external link to a missing file, in place of /images: named
// as such, with the dataset it stands for.
TEST_F(DataFileChecks, DanglingLinksAreNamed) {
  const std::string missing = (dir_ / "no_such_part.h5").string();
  const fs::path soft = write_linked("soft.h5", [](hid_t f, const char* name) {
    return H5Lcreate_soft("/nothing", f, name, H5P_DEFAULT, H5P_DEFAULT);
  });
  const fs::path external = write_linked("external.h5", [&](hid_t f, const char* name) {
    return H5Lcreate_external(missing.c_str(), "/images", f, name, H5P_DEFAULT, H5P_DEFAULT);
  });
  for (const fs::path& path : {soft, external}) {
    expect_usage_error([&] { DatasetFile f(path.string()); },
                       {path.string() + ": '/images' is a link whose target does not open"});
  }
}

// A path that cannot be followed says why (it said "no such file" for a link loop).
TEST_F(DataFileChecks, LinkLoopIsNamedAsOne) {
  fs::create_symlink("loop.h5", dir_ / "loop.h5");
  const std::string path = (dir_ / "loop.h5").string();
  expect_usage_error([&] { DatasetFile f(path); }, {path + ": Too many levels of symbolic links"});
}

TEST_F(DataFileChecks, SourceBesideTheFileIsRead) {
  write_source(dir_ / "source.h5", "images", 7);
  const fs::path path = write_virtual("source.h5", "images");
  EXPECT_EQ(first_pixel(path), 7);
  EXPECT_EQ(first_pixel(write_virtual(".", "raw")), 5);  // a source in the file itself
}

TEST_F(DataFileChecks, MissingSourceFileIsRefusedByName) {
  write_source(dir_ / "source.h5", "images", 7);
  const fs::path path = write_virtual("source.h5", "images");
  fs::rename(dir_ / "source.h5", dir_ / "moved.h5");
  expect_usage_error([&] { DatasetFile f(path.string()); },
                     {path.string(), "/images is a virtual dataset whose source source.h5:images",
                      "cannot be opened"});
}

TEST_F(DataFileChecks, MissingSourceDatasetIsRefusedByName) {
  write_source(dir_ / "source.h5", "images", 7);
  const fs::path path = write_virtual("source.h5", "pixels");
  expect_usage_error([&] { DatasetFile f(path.string()); }, {"source.h5:pixels"});
  const fs::path self = write_virtual(".", "nothing");
  expect_usage_error([&] { DatasetFile f(self.string()); }, {self.string(), ".:nothing"});
}

// HDF5 also looks in the directories of HDF5_VDS_PREFIX, a leading ${ORIGIN} being the
// virtual dataset's own directory: a source found there is not refused. HDF5 1.10 replaces
// ${ORIGIN} only at the start of the whole variable, so in a later directory it finds
// nothing and reads fill values: refused. (HDF5 reads the variable as it starts, so this
// process's setenv reaches the check, not HDF5's reads.)
TEST_F(DataFileChecks, SourceInTheVdsPrefixIsFound) {
  fs::create_directories(dir_ / "parts");
  write_source(dir_ / "parts" / "source.h5", "images", 9);
  const fs::path path = write_virtual("source.h5", "images");
  const H5Handle file = h5_open_read_only(path.string());
  const H5Handle images(HT_CHECK_H5(H5Dopen2(file.get(), "images", H5P_DEFAULT)), H5Dclose);
  EXPECT_EQ(h5_missing_virtual_source(images.get(), path.string()), "source.h5:images");
  for (const char* prefix : {"${ORIGIN}/parts", "${ORIGIN}/parts:/nowhere"}) {
    ASSERT_EQ(setenv("HDF5_VDS_PREFIX", prefix, 1), 0);
    EXPECT_EQ(h5_missing_virtual_source(images.get(), path.string()), "") << prefix;
  }
  ASSERT_EQ(setenv("HDF5_VDS_PREFIX", "/nowhere:${ORIGIN}/parts", 1), 0);
  EXPECT_EQ(h5_missing_virtual_source(images.get(), path.string()), "source.h5:images");
  ASSERT_EQ(setenv("HDF5_VDS_PREFIX", (dir_ / "parts").c_str(), 1), 0);
  EXPECT_EQ(h5_missing_virtual_source(images.get(), path.string()), "");
  unsetenv("HDF5_VDS_PREFIX");
}

// /images [4, 1, 2, 2] uint8 in external raw files (H5Pset_external): `parts` names each
// file and its offset and size there; the raw files are written apart.
TEST_F(DataFileChecks, ExternalRawFilesShorterThanTheirPartAreRefused) {
  const auto write_external = [&](const std::vector<std::pair<std::string, hsize_t>>& parts) {
    const fs::path path = dir_ / "external.h5";
    H5Handle file(HT_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)),
                  H5Fclose);
    H5Handle space(HT_CHECK_H5(H5Screate_simple(4, kDims, nullptr)), H5Sclose);
    H5Handle dcpl(HT_CHECK_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
    off_t offset = 3;  // each part starts 3 bytes into its file
    for (const auto& [name, size] : parts) {
      HT_CHECK_H5(H5Pset_external(dcpl.get(), name.c_str(), offset, size));
    }
    H5Handle images(HT_CHECK_H5(H5Dcreate2(file.get(), "images", H5T_STD_U8LE, space.get(),
                                           H5P_DEFAULT, dcpl.get(), H5P_DEFAULT)),
                    H5Dclose);
    write_labels(file.get());
    return path;
  };
  const auto raw = [&](const char* name, size_t bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << std::string(bytes, '\x07');
  };
  // 16 bytes of pixels: 10 in a.raw, the rest (H5F_UNLIMITED) in b.raw, each from byte 3.
  const fs::path path =
      write_external({{(dir_ / "a.raw").string(), 10}, {(dir_ / "b.raw").string(), H5F_UNLIMITED}});
  raw("a.raw", 13);
  raw("b.raw", 9);
  EXPECT_EQ(first_pixel(path), 7);  // all there: read through
  raw("b.raw", 8);                  // one byte short of the last pixel
  expect_usage_error([&] { DatasetFile f(path.string()); },
                     {path.string() + ": /images is stored in external raw files, and " +
                      (dir_ / "b.raw").string() +
                      " holds 8 bytes, fewer than the 9 its part of the dataset needs"});
  fs::remove(dir_ / "b.raw");
  expect_usage_error([&] { DatasetFile f(path.string()); },
                     {(dir_ / "b.raw").string() + ": No such file or directory"});
  // A relative name is looked for in the working directory (HDF5 takes $HDF5_EXTFILE_PREFIX,
  // where set, as the process starts: setenv here would reach the check but not HDF5).
  raw("c.raw", 19);
  const fs::path relative = write_external({{"c.raw", 16}});
  {
    struct InDir {  // back where it was, whatever happens
      fs::path before = fs::current_path();
      explicit InDir(const fs::path& dir) { fs::current_path(dir); }
      ~InDir() { fs::current_path(before); }
    } in_dir(dir_);
    EXPECT_EQ(first_pixel(relative), 7);
    raw("c.raw", 18);
    expect_usage_error([&] { DatasetFile f(relative.string()); },
                       {"c.raw holds 18 bytes, fewer than the 19"});
  }
  expect_usage_error([&] { DatasetFile f(relative.string()); },
                     {"c.raw: No such file or directory"});
}

// A flipped byte in /labels' type header (the bit offset of its int32) makes HDF5 read
// every label as 0, and one in /images' every pixel: refused as damaged.
TEST_F(DataFileChecks, IntegerTypesWhoseBitsLieOutsideTheirBytesAreRefused) {
  write_source(dir_ / "source.h5", "images", 7);
  {
    H5Handle file(HT_CHECK_H5(H5Fopen((dir_ / "source.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT)),
                  H5Fclose);
    write_labels(file.get());
  }
  EXPECT_EQ(first_pixel(dir_ / "source.h5"), 7);
  std::string bytes;
  {
    std::ifstream in(dir_ / "source.h5", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // A fixed-point type message: class 0 (version 1), little-endian signed (0x08) or
  // unsigned (0x00), its size, then the bit offset (2 bytes) and the precision (2 bytes).
  const auto flip = [&](const std::string& header, const char* what) {
    const size_t at = bytes.find(header);
    ASSERT_NE(at, std::string::npos) << what;
    ASSERT_EQ(bytes.find(header, at + 1), std::string::npos) << what;
    std::string damaged = bytes;
    damaged[at + header.size() + 1] = '\xff';  // the bit offset's high byte
    const fs::path path = dir_ / (std::string(what) + ".h5");
    std::ofstream(path, std::ios::binary) << damaged;
    expect_usage_error(
        [&] { DatasetFile f(path.string()); },
        {path.string() + ": /" + what + " has a damaged integer type (", " bits at bit 65280 of "});
  };
  flip(std::string("\x10\x08\x00\x00\x04\x00\x00\x00", 8), "labels");
  flip(std::string("\x10\x00\x00\x00\x01\x00\x00\x00", 8), "images");
}

// A flipped byte in /images' chunk dimensions (a chunk larger than the dataset in a
// dimension that cannot grow, which HDF5 never writes): HDF5 1.10 read it out of bounds (a
// segmentation fault); refused as damaged at the open.
TEST_F(DataFileChecks, ChunksLargerThanTheShapeAreRefused) {
  const fs::path path = dir_ / "chunked.h5";
  {
    H5Handle file(HT_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)),
                  H5Fclose);
    H5Handle space(HT_CHECK_H5(H5Screate_simple(4, kDims, nullptr)), H5Sclose);
    H5Handle dcpl(HT_CHECK_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
    const hsize_t chunk[4] = {2, 1, 2, 2};
    HT_CHECK_H5(H5Pset_chunk(dcpl.get(), 4, chunk));
    H5Handle images(HT_CHECK_H5(H5Dcreate2(file.get(), "images", H5T_STD_U8LE, space.get(),
                                           H5P_DEFAULT, dcpl.get(), H5P_DEFAULT)),
                    H5Dclose);
    const std::vector<uint8_t> values(16, 7);
    HT_CHECK_H5(
        H5Dwrite(images.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
    write_labels(file.get());
  }
  EXPECT_EQ(first_pixel(path), 7);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // The layout message's chunk dimensions, 4 bytes each: 2, 1, 2, 2.
  const std::string dims("\x02\0\0\0\x01\0\0\0\x02\0\0\0\x02\0\0\0", 16);
  const size_t at = bytes.find(dims);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(dims, at + 1), std::string::npos);
  bytes[at + 4] = '\xfe';
  const fs::path damaged = dir_ / "damaged.h5";
  std::ofstream(damaged, std::ios::binary) << bytes;
  expect_usage_error([&] { DatasetFile f(damaged.string()); },
                     {damaged.string() + ": /images has chunks of [2, 254, 2, 2], larger than its "
                                         "shape [4, 1, 2, 2] allows (a damaged header)"});
}

// A data file truncated or written over in place while a job reads it per batch: HDF5 reads
// the missing bytes as zeros, or another file's; the next read names the change instead.
TEST_F(DataFileChecks, FileChangedWhileReadIsNamed) {
  const fs::path path = dir_ / "live.h5";
  write_source(path, "images", 7);
  {
    H5Handle file(HT_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), H5Fclose);
    write_labels(file.get());
  }
  const auto size = static_cast<int64_t>(fs::file_size(path));
  std::vector<uint8_t> images(16);
  std::vector<int32_t> labels(4);
  const int64_t rows[2] = {1, 3};
  {
    const DatasetFile data(path.string());
    data.read_rows(0, 4, images.data(), labels.data());
    fs::resize_file(path, static_cast<uintmax_t>(size - 8));  // the last two labels' bytes
    const std::string changed = path.string() + ": changed while this job reads it (" +
                                std::to_string(size) + " bytes when opened, " +
                                std::to_string(size - 8) + " now)";
    expect_usage_error([&] { data.read_rows(0, 4, images.data(), labels.data()); }, {changed});
    expect_usage_error([&] { data.read_labels(0, 1, labels.data()); }, {changed});
    expect_usage_error([&] { data.read_row_set(rows, 2, images.data(), labels.data()); },
                       {changed});
  }
  write_source(path, "images", 7);
  {
    H5Handle file(HT_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), H5Fclose);
    write_labels(file.get());
  }
  const DatasetFile data(path.string());
  data.read_row_set(rows, 2, images.data(), labels.data());
  EXPECT_EQ(labels[1], 1);
  // The same bytes written again in place: the size is the same, the time it was written not
  // (set apart by a second: the kernel's clock for it may not have moved yet).
  const auto written = fs::last_write_time(path);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(path, std::ios::binary | std::ios::in) << bytes;
  fs::last_write_time(path, written + std::chrono::seconds(1));
  expect_usage_error([&] { data.read_rows(0, 4, images.data(), labels.data()); },
                     {path.string() + ": changed while this job reads it (written since it was "
                                      "opened): a data file must not change during a run"});
}

}  // namespace
}  // namespace hpctrain
