// The converters of data-tools/: DatasetWriter (unclosed files, failures that leave no
// file, bad options, chunk sizes), IDX parsing (gzip and plain, truncated, corrupt), the
// validation split, and the text of inspect_data_file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/usage_error.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/idx.hpp"
#include "data-tools/inspect_data.hpp"
#include "data/dataset_file.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using test::expect_usage_error;

std::string temp_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) / ("ht_convert_" + name)).string();
}

DatasetWriterOptions small_options() {
  DatasetWriterOptions o;
  o.c = 1;
  o.h = 2;
  o.w = 3;
  o.num_classes = 3;
  return o;
}

TEST(DataWriter, DestructorFinishesAnUnclosedFile) {
  const std::string path = temp_path("unclosed.h5");
  fs::remove(path);
  const std::vector<uint8_t> images(12, 9);
  const std::vector<int32_t> labels = {2, 0};
  {
    DatasetWriter writer(path, small_options());
    writer.append(2, images.data(), labels.data());
  }
  EXPECT_EQ(DatasetFile(path).shape().n, 2);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// The same rows give the same bytes, a second later too: no times in the objects' headers
// (synth, split and shard promise the same file for the same options).
TEST(DataWriter, SameRowsGiveTheSameBytes) {
  const std::vector<uint8_t> images(12, 9);
  const std::vector<int32_t> labels = {2, 0};
  std::string first;
  for (int i = 0; i < 2; ++i) {
    const std::string path = temp_path("same_bytes.h5");
    fs::remove(path);
    DatasetWriter writer(path, small_options());
    writer.append(2, images.data(), labels.data());
    writer.close();
    std::ifstream in(path, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (i == 0) {
      first = bytes;
      std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    } else {
      EXPECT_EQ(bytes, first);
    }
  }
}

TEST(DataWriter, ManyClassNames) {
  // 5,000 names: an attribute far above HDF5's 64 KiB for compact attributes.
  const std::string path = temp_path("many_classes.h5");
  DatasetWriterOptions o = small_options();
  o.num_classes = 5000;
  for (int k = 0; k < o.num_classes; ++k)
    o.class_names.push_back("class number " + std::to_string(k));
  const std::vector<uint8_t> images(6, 1);
  const std::vector<int32_t> labels = {4999};
  {
    DatasetWriter writer(path, o);
    writer.append(1, images.data(), labels.data());
  }
  const DatasetFile f(path);
  ASSERT_EQ(f.shape().class_names.size(), 5000u);
  EXPECT_EQ(f.shape().class_names.back(), "class number 4999");
}

TEST(DataWriter, ExceptionLeavesNoFileUnderEitherName) {
  const std::string path = temp_path("abandoned.h5");
  fs::remove(path);
  const std::vector<uint8_t> images(12, 9);
  const std::vector<int32_t> labels = {1, 1};
  try {
    DatasetWriter writer(path, small_options());
    writer.append(2, images.data(), labels.data());
    throw std::runtime_error("conversion failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(DataWriter, RejectsLabelsOutsideTheClasses) {
  const std::string path = temp_path("badlabel.h5");
  const std::vector<uint8_t> images(18, 9);
  const std::vector<int32_t> labels = {0, 1, 3};
  expect_usage_error(
      [&] {
        DatasetWriter writer(path, small_options());
        writer.append(3, images.data(), labels.data());
      },
      {path, "label 3 at row 2", "outside [0, 3)"});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(DataWriter, RejectsBadOptions) {
  DatasetWriterOptions o = small_options();
  o.class_names = {"a", "b"};
  expect_usage_error([&] { DatasetWriter(temp_path("opts.h5"), o); }, {"2 class names", "3"});
  expect_usage_error([&] { DatasetWriter(temp_path("no_such_dir/x.h5"), small_options()); },
                     {"no_such_dir", "does not exist"});
  // A directory where the file goes: refused before anything is written (it failed at the
  // final rename, exit 1).
  fs::create_directories(temp_path("a_dir"));
  expect_usage_error([&] { DatasetWriter(temp_path("a_dir"), small_options()); },
                     {"a_dir: is a directory"});
  expect_usage_error([&] { DatasetWriter(temp_path("x.h5") + "/", small_options()); },
                     {"is a directory"});
  EXPECT_FALSE(fs::exists(temp_path("a_dir.tmp")));
}

TEST(DataWriter, DefaultChunkHoldsAFewSamples) {
  DatasetWriterOptions o = small_options();
  o.h = 28;
  o.w = 28;
  DatasetWriter mnist(temp_path("chunk_mnist.h5"), o);
  EXPECT_GT(mnist.chunk_samples(), 16);
  EXPECT_LE(mnist.chunk_samples() * 28 * 28, 64 * 1024);
  o.c = 3;
  o.h = 224;
  o.w = 224;
  o.type = SampleType::kF32;
  DatasetWriter big(temp_path("chunk_big.h5"), o);
  EXPECT_EQ(big.chunk_samples(), 1);
}

// ---------------------------------------------------------------- IDX

std::vector<uint8_t> idx_bytes(uint8_t rank, const std::vector<uint32_t>& dims,
                               const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0, 0, 0x08, rank};
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<uint8_t>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
}

class DataIdx : public ::testing::TestWithParam<bool> {};  // parameter: gzip

TEST_P(DataIdx, ReadsImagesAndLabelsAndConverts) {
  const bool gz = GetParam();
  const std::string suffix = gz ? ".gz" : "";
  const std::string images_path = temp_path("idx_images" + suffix);
  const std::string labels_path = temp_path("idx_labels" + suffix);
  const uint32_t n = 5, rows = 3, cols = 4;
  std::vector<uint8_t> pixels(n * rows * cols);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 3 + 1);
  const std::vector<uint8_t> labels = {3, 0, 9, 1, 3};
  write_file(images_path, idx_bytes(3, {n, rows, cols}, pixels), gz);
  write_file(labels_path, idx_bytes(1, {n}, labels), gz);

  IdxReader reader(images_path, 3);
  EXPECT_EQ(reader.dims(), (std::vector<int64_t>{n, rows, cols}));
  EXPECT_EQ(reader.item_bytes(), rows * cols);
  std::vector<uint8_t> got(pixels.size());
  reader.read(2, got.data());
  reader.read(3, got.data() + 2 * rows * cols);
  reader.expect_end();
  EXPECT_EQ(got, pixels);

  IdxPair pair = open_idx_pair(images_path, labels_path, 0);
  EXPECT_EQ(pair.num_classes, 10);  // largest label + 1
  EXPECT_EQ(pair.labels, (std::vector<int32_t>{3, 0, 9, 1, 3}));

  // Convert with a split: rows 1 and 3 to the second file; order kept in each.
  DatasetWriterOptions o;
  o.h = rows;
  o.w = cols;
  o.num_classes = pair.num_classes;
  const std::string a_path = temp_path("idx_a" + suffix + ".h5");
  const std::string b_path = temp_path("idx_b" + suffix + ".h5");
  {
    DatasetWriter a(a_path, o), b(b_path, o);
    write_idx_rows(pair, {0, 1, 0, 1, 0}, {&a, &b});
  }
  const DatasetFile fa(a_path), fb(b_path);
  ASSERT_EQ(fa.shape().n, 3);
  ASSERT_EQ(fb.shape().n, 2);
  EXPECT_EQ(fa.shape().c, 1);
  std::vector<uint8_t> img(3 * rows * cols);
  std::vector<int32_t> lab(3);
  fa.read_rows(0, 3, img.data(), lab.data());
  EXPECT_EQ(lab, (std::vector<int32_t>{3, 9, 3}));
  for (int r : {0, 1, 2}) {
    const int src_row = r * 2;  // rows 0, 2, 4
    EXPECT_EQ(std::memcmp(img.data() + r * rows * cols, pixels.data() + src_row * rows * cols,
                          rows * cols),
              0);
  }
  fb.read_rows(0, 2, img.data(), lab.data());
  EXPECT_EQ((std::vector<int32_t>{lab[0], lab[1]}), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(std::memcmp(img.data() + rows * cols, pixels.data() + 3 * rows * cols, rows * cols), 0);
}

TEST_P(DataIdx, TruncatedFile) {
  const bool gz = GetParam();
  const std::string path = temp_path(std::string("idx_truncated") + (gz ? ".gz" : ""));
  // The header declares 5 images of 2x2 but only 4.5 follow.
  write_file(path, idx_bytes(3, {5, 2, 2}, std::vector<uint8_t>(18, 7)), gz);
  IdxReader reader(path, 3);
  std::vector<uint8_t> buf(20);
  expect_usage_error([&] { reader.read(5, buf.data()); },
                     {path, "truncated", "declares 5 items", "ends after 4"});
  write_file(path, {0, 0, 8, 3, 0, 0}, gz);
  expect_usage_error([&] { IdxReader r(path, 3); }, {path, "truncated", "header"});
}

INSTANTIATE_TEST_SUITE_P(Compression, DataIdx, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "gzip" : "plain"; });

TEST(DataIdxErrors, HeaderAndPairChecks) {
  const std::string images = temp_path("idxerr_images");
  const std::string labels = temp_path("idxerr_labels");
  write_file(images, idx_bytes(3, {3, 2, 2}, std::vector<uint8_t>(12, 1)), false);
  write_file(labels, idx_bytes(1, {4}, {0, 1, 2, 3}), false);
  expect_usage_error([&] { open_idx_pair(images, labels, 0); },
                     {images + " has 3 images but " + labels + " has 4 labels"});
  expect_usage_error([&] { IdxReader r(labels, 3); }, {labels, "1 dimensions, expected 3"});
  expect_usage_error([&] { IdxReader r(temp_path("idxerr_missing"), 1); }, {"no such file"});

  write_file(labels, idx_bytes(1, {3}, {0, 1, 12}), false);
  expect_usage_error([&] { open_idx_pair(images, labels, 10); },
                     {labels, "label 12 at item 2 is outside [0, 10)"});

  std::vector<uint8_t> bad = idx_bytes(1, {3}, {0, 1, 2});
  bad[0] = 0x1f;
  write_file(labels, bad, false);
  expect_usage_error([&] { IdxReader r(labels, 1); }, {labels, "not an IDX file"});
  bad = idx_bytes(1, {3}, {0, 1, 2});
  bad[2] = 0x0d;  // float elements
  write_file(labels, bad, false);
  expect_usage_error([&] { IdxReader r(labels, 1); }, {labels, "0x0d", "not supported"});
  write_file(labels, idx_bytes(1, {3}, {0, 1, 2, 2}), false);  // one byte too many
  expect_usage_error(
      [&] {
        IdxReader r(labels, 1);
        std::vector<uint8_t> buf(3);
        r.read(3, buf.data());
        r.expect_end();
      },
      {labels, "unexpected data after the 3 items"});
  // Image sides beyond the converters' limit, or an image over 1 GiB: refused from the
  // header (it gave std::bad_alloc for a block of 1024 such images, or overflowed).
  write_file(images, idx_bytes(3, {1, 70000, 2}, {}), false);
  expect_usage_error([&] { IdxReader r(images, 3); },
                     {images, "dimension 1 is 70000, above the limit of 65536"});
  write_file(images, idx_bytes(3, {1, 65536, 65536}, {}), false);
  expect_usage_error([&] { IdxReader r(images, 3); }, {images, "over the 1 GiB limit"});
}

TEST(DataIdxErrors, CorruptGzipIsAReadErrorNotTruncation) {
  const std::string path = temp_path("idx_corrupt.gz");
  write_file(path, idx_bytes(1, {4000}, std::vector<uint8_t>(4000, 5)), true);
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t i = 12; i + 8 < bytes.size(); ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  expect_usage_error(
      [&] {
        IdxReader r(path, 1);
        std::vector<uint8_t> buf(4000);
        r.read(4000, buf.data());
      },
      {path});
}

// A gzip file missing the last bytes of its trailer (the CRC-32 and length that verify the
// data): all its data there, but unverified; it was accepted.
TEST(DataIdxErrors, GzipWithoutItsTrailerIsTruncated) {
  const std::string path = temp_path("idx_no_trailer.gz");
  write_file(path, idx_bytes(1, {3}, {0, 1, 2}), true);
  const auto whole = std::filesystem::file_size(path);
  for (const uintmax_t cut : {1, 8}) {
    write_file(path, idx_bytes(1, {3}, {0, 1, 2}), true);
    std::filesystem::resize_file(path, whole - cut);
    expect_usage_error(
        [&] {
          IdxReader r(path, 1);
          std::vector<uint8_t> buf(3);
          r.read(3, buf.data());
          r.expect_end();
        },
        {path + ": truncated: the gzip stream ends before the checksum that verifies its data"});
  }
}

TEST(DataSplit, SeededSubsetOfTheRequestedSize) {
  const std::vector<uint8_t> a = validation_rows(1000, 100, 1);
  EXPECT_EQ(std::count(a.begin(), a.end(), 1), 100);
  EXPECT_EQ(validation_rows(1000, 100, 1), a);  // same seed, same split
  EXPECT_NE(validation_rows(1000, 100, 2), a);
  // Spread over the whole range, not a prefix.
  EXPECT_GT(std::count(a.begin() + 500, a.end(), 1), 20);
  const std::vector<uint8_t> none = validation_rows(10, 0, 1);
  EXPECT_EQ(std::count(none.begin(), none.end(), 1), 0);
  const std::vector<uint8_t> all = validation_rows(10, 10, 3);
  EXPECT_EQ(std::count(all.begin(), all.end(), 1), 10);
}

// ---------------------------------------------------------------- inspect

TEST(DataInspect, PrintsShapeClassesAttributesAndRange) {
  const std::string path = temp_path("inspect.h5");
  DatasetWriterOptions o;
  o.c = 1;
  o.h = 2;
  o.w = 2;
  o.num_classes = 3;
  o.class_names = {"cat", "dog", "bird"};
  o.source = "hand-made for the test";
  std::vector<uint8_t> images = {10, 20, 30, 40, 50, 60, 70, 80, 90, 200, 3, 4, 5, 6, 7, 8};
  std::vector<int32_t> labels = {1, 1, 0, 1};
  {
    DatasetWriter w(path, o);
    w.append(4, images.data(), labels.data());
  }
  std::ostringstream out;
  inspect_data_file(path, out);
  const std::string text = out.str();
  for (const std::string& expected :
       {path, std::string("samples: 4"), std::string("[4, 1, 2, 2]"), std::string("uint8"),
        std::string("C=1 H=2 W=2"), std::string("num_classes: 3"),
        std::string("source: "
                    "hand-made for "
                    "the test"),
        std::string("min 3, max 200")}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing '" << expected << "' in\n"
                                                      << text;
  }
  // Histogram rows: class id, name, count, percent.
  EXPECT_NE(text.find("cat"), std::string::npos);
  EXPECT_NE(text.find("dog"), std::string::npos);
  EXPECT_NE(text.find("75.00%"), std::string::npos) << text;
  EXPECT_NE(text.find("25.00%"), std::string::npos) << text;
  EXPECT_NE(text.find("0.00%"), std::string::npos) << text;  // bird: none
  expect_usage_error([&] { inspect_data_file(temp_path("nope.h5"), out); }, {"no such file"});
  // A long class name (an image folder's) keeps its row whole: it overflowed a fixed buffer,
  // losing the count and the line's end.
  o.class_names[2] = std::string(240, 'b');
  {
    DatasetWriter w(path, o);
    w.append(4, images.data(), labels.data());
  }
  std::ostringstream long_names;
  inspect_data_file(path, long_names);
  EXPECT_NE(long_names.str().find("     2  " + std::string(240, 'b') + "          0    0.00%\n"),
            std::string::npos)
      << long_names.str();
}

TEST(DataInspect, Float16RangeIsConverted) {
  const std::string path = temp_path("inspect_f16.h5");
  DatasetWriterOptions o = small_options();
  o.type = SampleType::kF16;
  std::vector<uint16_t> halves;
  for (float f : {-1.5f, 0.25f, 2.0f, 0.0f, 1.0f, 3.5f}) halves.push_back(float_to_half(f));
  const std::vector<int32_t> labels = {2};
  {
    DatasetWriter w(path, o);
    w.append(1, halves.data(), labels.data());
  }
  std::ostringstream out;
  inspect_data_file(path, out);
  EXPECT_NE(out.str().find("float16"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("min -1.5, max 3.5"), std::string::npos) << out.str();
}

// Every sample of a float file is checked, not only the first 16 whose range is shown:
// training refuses a sample holding NaN or infinity when it reads it, so inspect reports how
// many there are and the first (a report, exit 0, as for labels out of range); the range is
// that of the finite values.
TEST(DataInspect, ChecksEverySampleForValuesThatAreNotFinite) {
  const std::string path = temp_path("inspect_nan.h5");
  DatasetWriterOptions o = small_options();
  o.type = SampleType::kF32;
  const int n = 40;
  std::vector<float> images(static_cast<size_t>(n) * 6, 0.5f);
  images[0] = -2.0f;
  images[6 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();
  images[6 * 25 + 4] = std::numeric_limits<float>::infinity();
  images[6 * 39] = -std::numeric_limits<float>::infinity();
  const std::vector<int32_t> labels(n, 1);
  {
    DatasetWriter w(path, o);
    w.append(n, images.data(), labels.data());
  }
  std::ostringstream out;
  inspect_data_file(path, out);
  EXPECT_NE(out.str().find("finite values): min -2, max 0.5"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("not finite (training refuses them): 3, the first at row 3 (nan)"),
            std::string::npos)
      << out.str();
}

}  // namespace
}  // namespace hpctrain
