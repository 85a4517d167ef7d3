// HDF5 virtual datasets as data files: a source that opens is read through; one that does
// not (moved, renamed, a dataset name that is not there) is refused by name, where HDF5
// itself would read the rows it maps as the fill value without a word. Links in place of a
// dataset whose target does not open are named too.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
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

class VirtualDataTest : public ::testing::Test {
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
TEST_F(VirtualDataTest, DanglingLinksAreNamed) {
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

TEST_F(VirtualDataTest, SourceBesideTheFileIsRead) {
  write_source(dir_ / "source.h5", "images", 7);
  const fs::path path = write_virtual("source.h5", "images");
  EXPECT_EQ(first_pixel(path), 7);
  EXPECT_EQ(first_pixel(write_virtual(".", "raw")), 5);  // a source in the file itself
}

TEST_F(VirtualDataTest, MissingSourceFileIsRefusedByName) {
  write_source(dir_ / "source.h5", "images", 7);
  const fs::path path = write_virtual("source.h5", "images");
  fs::rename(dir_ / "source.h5", dir_ / "moved.h5");
  expect_usage_error([&] { DatasetFile f(path.string()); },
                     {path.string(), "/images is a virtual dataset whose source source.h5:images",
                      "cannot be opened"});
}

TEST_F(VirtualDataTest, MissingSourceDatasetIsRefusedByName) {
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
TEST_F(VirtualDataTest, SourceInTheVdsPrefixIsFound) {
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

}  // namespace
}  // namespace hpctrain
