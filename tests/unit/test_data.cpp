// Data format and conversion: float16 conversion (exhaustive), DatasetWriter ->
// DatasetFile round trips in every sample type, validation errors with their messages,
// IDX parsing (gzip and plain, truncated), the validation split, and inspect output.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "core/random.hpp"
#include "data/dataset_file.hpp"
#include "data/dataset_writer.hpp"
#include "data/h5.hpp"
#include "data/idx.hpp"
#include "data/inspect_data.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) / ("ht_data_" + name)).string();
}

// Runs `f`, expecting a UsageError whose message contains every one of `parts`.
void expect_usage_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no UsageError thrown; expected one mentioning '" << parts[0] << "'";
  } catch (const UsageError& e) {
    for (const std::string& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
    }
  }
}

// ---------------------------------------------------------------- float16

// The value a binary16 bit pattern denotes, computed independently with ldexp.
double half_reference(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0x1f) return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::nan("");
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

TEST(DataHalf, ExhaustiveRoundTripAndValues) {
  const auto& table = half_to_float_table();
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = half_to_float(h);
    ASSERT_EQ(std::memcmp(&f, &table[i], sizeof(f)), 0) << "table differs at 0x" << std::hex << i;
    const double ref = half_reference(h);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << std::hex << i;
      // Quiet NaNs (top mantissa bit set) keep their payload exactly.
      if (h & 0x200) {
        ASSERT_EQ(float_to_half(f), h) << std::hex << i;
      }
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), ref) << std::hex << i;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << i;
    ASSERT_EQ(float_to_half(f), h) << "round trip of 0x" << std::hex << i;
  }
}

TEST(DataHalf, RoundsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Overflow: 65504 is the largest half; 65520 is the tie that rounds to inf.
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  // Underflow through the subnormals: 2^-24 is the smallest, 2^-25 ties to zero.
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 * 2^-24 ties to 2
  EXPECT_EQ(float_to_half(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 * 2^-24 ties to 2
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -30)), 0x0400);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
}

TEST(DataHalf, RandomFloatsRoundToTheNearestHalf) {
  Rng rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns over the half range and a bit beyond (|x| < 2^17).
    const auto bits = static_cast<uint32_t>(rng.uniform_int(0x48000000u)) |
                      (rng.uniform_int(2) ? 0x80000000u : 0u);
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    const uint16_t h = float_to_half(f);
    if (std::fabs(f) >= 65520.0f) {
      ASSERT_EQ(h & 0x7fff, 0x7c00) << f;
      continue;
    }
    const double err = std::fabs(half_to_float(h) - static_cast<double>(f));
    // Neither neighbour (same sign, magnitude one step up or down) may be closer, and on
    // a tie the chosen mantissa must be even.
    for (int step : {-1, 1}) {
      const int mag = (h & 0x7fff) + step;
      if (mag < 0 || mag > 0x7bff) continue;
      const auto other = static_cast<uint16_t>((h & 0x8000) | mag);
      const double other_err = std::fabs(half_to_float(other) - static_cast<double>(f));
      ASSERT_LE(err, other_err) << f;
      if (err == other_err) {
        ASSERT_EQ(h & 1, 0) << f;
      }
    }
  }
}

// The bulk float -> half path (F16C where the CPU has it) gives float_to_half's bits for a
// stride through all 2^32 patterns, every pattern near the subnormal and overflow
// boundaries, and NaNs with payloads; at lengths that leave a scalar tail.
TEST(DataHalf, BulkFloatToHalfMatchesScalarEverywhere) {
  std::vector<uint32_t> patterns;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093)
    patterns.push_back(static_cast<uint32_t>(b));
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t b = 0x32fff000u; b < 0x38801000u; b += 61) patterns.push_back(sign | b);
    for (uint32_t b = 0x477fe000u; b < 0x47801000u; ++b) patterns.push_back(sign | b);
    for (uint32_t b : {0x7f800000u, 0x7f800001u, 0x7fc00000u, 0x7fa5a5a5u, 0x7fffffffu, 0u, 1u})
      patterns.push_back(sign | b);
  }
  std::vector<float> src(patterns.size());
  std::memcpy(src.data(), patterns.data(), src.size() * sizeof(float));
  for (size_t n : {src.size(), size_t{13}, size_t{7}}) {
    std::vector<uint16_t> bulk(n);
    float_to_half_n(src.data(), bulk.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bulk[i], float_to_half(src[i])) << std::hex << patterns[i];
    }
  }
}

TEST(DataHalf, BulkConversionMatchesScalar) {
  std::vector<uint16_t> src(1001);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 65 + 3);
  std::vector<float> dst(src.size());
  half_to_float_n(src.data(), dst.data(), src.size());
  std::vector<uint16_t> back(src.size());
  float_to_half_n(dst.data(), back.data(), dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const float f = half_to_float(src[i]);
    EXPECT_EQ(std::memcmp(&f, &dst[i], sizeof(f)), 0) << i;
    if (!std::isnan(f)) {
      EXPECT_EQ(back[i], src[i]) << i;
    }
  }
}

// ---------------------------------------------------------------- writer -> reader

struct RoundTripCase {
  SampleType type;
  int deflate;
};

class DataRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

// Random, never-zero sample bytes valid for the type (f16/f32 without NaN, so values
// compare by bits and by value).
std::vector<uint8_t> random_samples(SampleType type, size_t elems, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> bytes(elems * sample_type_size(type));
  for (size_t i = 0; i < elems; ++i) {
    if (type == SampleType::kU8) {
      bytes[i] = static_cast<uint8_t>(1 + rng.uniform_int(255));
    } else if (type == SampleType::kF16) {
      const uint16_t h = float_to_half(static_cast<float>(rng.normal() * 3.0 + 0.5));
      std::memcpy(&bytes[i * 2], &h, 2);
    } else {
      const auto f = static_cast<float>(rng.normal() * 3.0 + 0.5);
      std::memcpy(&bytes[i * 4], &f, 4);
    }
  }
  return bytes;
}

TEST_P(DataRoundTrip, WriteThenReadRowsAtOffsets) {
  const RoundTripCase tc = GetParam();
  const std::string path = temp_path(std::string("roundtrip_") + to_string(tc.type) + "_" +
                                     std::to_string(tc.deflate) + ".h5");
  const int64_t n = 37, c = 3, h = 5, w = 7;  // odd everywhere; 37 rows over chunks of 4
  const size_t sample_bytes = c * h * w * sample_type_size(tc.type);
  const std::vector<uint8_t> images = random_samples(tc.type, n * c * h * w, 11);
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>((i * 7) % 5);

  DatasetWriterOptions o;
  o.type = tc.type;
  o.c = c;
  o.h = h;
  o.w = w;
  o.num_classes = 5;
  o.class_names = {"zero", "one", "two", "three", "four"};
  o.source = "unit test";
  o.chunk_samples = 4;
  o.deflate_level = tc.deflate;
  fs::remove(path);  // a file left by an earlier run would defeat the check below
  {
    DatasetWriter writer(path, o);
    EXPECT_TRUE(fs::exists(writer.temp_path()));
    EXPECT_FALSE(fs::exists(path));  // nothing under the final name until close
    int64_t row = 0;
    for (int64_t count : {1, 10, 0, 26}) {  // uneven appends crossing chunk boundaries
      writer.append(count, images.data() + row * sample_bytes, labels.data() + row);
      row += count;
    }
    EXPECT_EQ(writer.rows(), n);
    writer.close();
    EXPECT_FALSE(fs::exists(writer.temp_path()));
  }

  const DatasetFile file(path);
  const DatasetShape& s = file.shape();
  EXPECT_EQ(s.n, n);
  EXPECT_EQ(s.c, c);
  EXPECT_EQ(s.h, h);
  EXPECT_EQ(s.w, w);
  EXPECT_EQ(s.type, tc.type);
  EXPECT_EQ(s.num_classes, 5);
  EXPECT_EQ(s.class_names, o.class_names);
  EXPECT_EQ(s.sample_bytes(), sample_bytes);

  struct Range {
    int64_t start, count;
  };
  for (const Range r :
       {Range{0, n}, Range{0, 1}, Range{5, 13}, Range{36, 1}, Range{3, 4}, Range{10, 0}}) {
    std::vector<uint8_t> got(r.count * sample_bytes + 1, 0xAB);  // +1: detect overrun
    std::vector<int32_t> got_labels(r.count + 1, -7);
    file.read_rows(r.start, r.count, got.data(), got_labels.data());
    EXPECT_EQ(
        std::memcmp(got.data(), images.data() + r.start * sample_bytes, r.count * sample_bytes), 0)
        << "rows " << r.start << "+" << r.count;
    EXPECT_EQ(got.back(), 0xAB);
    for (int64_t i = 0; i < r.count; ++i) EXPECT_EQ(got_labels[i], labels[r.start + i]);
    EXPECT_EQ(got_labels.back(), -7);
  }

  // Bounds are invariants of the caller (the sampler): Error, not UsageError.
  std::vector<uint8_t> buf(2 * sample_bytes);
  std::vector<int32_t> lab(2);
  EXPECT_THROW(file.read_rows(36, 2, buf.data(), lab.data()), Error);
  EXPECT_THROW(file.read_rows(-1, 1, buf.data(), lab.data()), Error);
  EXPECT_THROW(file.read_rows(0, -1, buf.data(), lab.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Types, DataRoundTrip,
    ::testing::Values(RoundTripCase{SampleType::kU8, 0}, RoundTripCase{SampleType::kF16, 0},
                      RoundTripCase{SampleType::kF32, 0}, RoundTripCase{SampleType::kU8, 4},
                      RoundTripCase{SampleType::kF16, 4}, RoundTripCase{SampleType::kF32, 4}),
    [](const auto& p) {
      return std::string(to_string(p.param.type)) + (p.param.deflate > 0 ? "_deflate" : "");
    });

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

// ---------------------------------------------------------------- validation errors

// Writes an HDF5 file with the given datasets directly (not through DatasetWriter), so
// that tests can build every malformed variant. An empty dims vector omits the dataset.
struct RawDataset {
  std::vector<hsize_t> dims;
  hid_t type = H5T_NATIVE_UINT8;
};

void write_raw(const std::string& path, const RawDataset& images, const RawDataset& labels,
               const std::vector<int32_t>& label_values = {}, int num_classes_attr = 0) {
  h5_quiet();
  H5Handle file(HT_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)),
                H5Fclose);
  for (const auto& [name, d] : {std::pair<const char*, RawDataset>{"images", images},
                                std::pair<const char*, RawDataset>{"labels", labels}}) {
    if (d.dims.empty()) continue;
    H5Handle space(
        HT_CHECK_H5(H5Screate_simple(static_cast<int>(d.dims.size()), d.dims.data(), nullptr)),
        H5Sclose);
    H5Handle set(HT_CHECK_H5(H5Dcreate2(file.get(), name, d.type, space.get(), H5P_DEFAULT,
                                        H5P_DEFAULT, H5P_DEFAULT)),
                 H5Dclose);
    if (std::string(name) == "labels" && !label_values.empty()) {
      HT_CHECK_H5(H5Dwrite(set.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                           label_values.data()));
    }
  }
  if (num_classes_attr > 0) {
    H5Handle space(HT_CHECK_H5(H5Screate(H5S_SCALAR)), H5Sclose);
    H5Handle attr(HT_CHECK_H5(H5Acreate2(file.get(), "num_classes", H5T_STD_I32LE, space.get(),
                                         H5P_DEFAULT, H5P_DEFAULT)),
                  H5Aclose);
    HT_CHECK_H5(H5Awrite(attr.get(), H5T_NATIVE_INT, &num_classes_attr));
  }
}

TEST(DataFile, MissingFileAndNotHdf5) {
  const std::string missing = temp_path("does_not_exist.h5");
  expect_usage_error([&] { DatasetFile f(missing); }, {missing + ": no such file"});
  const std::string text = temp_path("text.h5");
  std::ofstream(text) << "not hdf5 at all\n";
  expect_usage_error([&] { DatasetFile f(text); }, {text + ": not an HDF5 file"});
}

TEST(DataFile, MissingDatasets) {
  const std::string path = temp_path("missing_ds.h5");
  write_raw(path, {}, {{4}, H5T_NATIVE_INT32});
  expect_usage_error([&] { DatasetFile f(path); }, {path + ": missing dataset '/images'"});
  write_raw(path, {{4, 1, 2, 2}}, {});
  expect_usage_error([&] { DatasetFile f(path); }, {path + ": missing dataset '/labels'"});
}

TEST(DataFile, WrongRanks) {
  const std::string path = temp_path("rank.h5");
  write_raw(path, {{4, 2, 2}}, {{4}, H5T_NATIVE_INT32});
  expect_usage_error([&] { DatasetFile f(path); },
                     {path + ": /images has rank 3, expected 4 [N, C, H, W]"});
  write_raw(path, {{4, 1, 2, 2}}, {{4, 1}, H5T_NATIVE_INT32});
  expect_usage_error([&] { DatasetFile f(path); }, {path + ": /labels has rank 2, expected 1 [N]"});
}

TEST(DataFile, UnsupportedTypes) {
  const std::string path = temp_path("types.h5");
  write_raw(path, {{4, 1, 2, 2}, H5T_NATIVE_DOUBLE}, {{4}, H5T_NATIVE_INT32});
  expect_usage_error([&] { DatasetFile f(path); },
                     {path, "/images has type float64", "expected uint8, float16 or float32"});
  write_raw(path, {{4, 1, 2, 2}, H5T_NATIVE_INT8}, {{4}, H5T_NATIVE_INT32});
  expect_usage_error([&] { DatasetFile f(path); }, {path, "/images has type int8"});
  write_raw(path, {{4, 1, 2, 2}}, {{4}, H5T_NATIVE_FLOAT});
  expect_usage_error([&] { DatasetFile f(path); },
                     {path, "/labels has type float32", "expected integer class ids"});
}

TEST(DataFile, SizeMismatchAndEmpty) {
  const std::string path = temp_path("mismatch.h5");
  write_raw(path, {{4, 1, 2, 2}}, {{5}, H5T_NATIVE_INT32});
  expect_usage_error([&] { DatasetFile f(path); },
                     {path, "/images has 4 samples but /labels has 5"});
  write_raw(path, {{0, 1, 2, 2}}, {{0}, H5T_NATIVE_INT32});
  expect_usage_error([&] { DatasetFile f(path); }, {path, "no samples (N = 0)"});
}

TEST(DataFile, LabelOutOfRangeIsReportedWithItsRow) {
  const std::string path = temp_path("labelrange.h5");
  write_raw(path, {{4, 1, 2, 2}}, {{4}, H5T_NATIVE_INT16}, {0, 1, 5, 2}, 3);
  const DatasetFile file(path);
  EXPECT_EQ(file.shape().num_classes, 3);
  std::vector<uint8_t> images(16);
  std::vector<int32_t> labels(4);
  file.read_rows(0, 2, images.data(), labels.data());  // rows before the bad one are fine
  EXPECT_EQ(labels[1], 1);
  expect_usage_error([&] { file.read_rows(1, 3, images.data(), labels.data()); },
                     {path, "label 5 at row 2 is outside [0, 3)"});
}

TEST(DataFile, NumClassesFromLabelsWhenNoAttribute) {
  const std::string path = temp_path("scan.h5");
  write_raw(path, {{4, 1, 2, 2}}, {{4}, H5T_STD_I64BE}, {0, 4, 1, 2});
  EXPECT_EQ(DatasetFile(path).shape().num_classes, 5);
  write_raw(path, {{4, 1, 2, 2}}, {{4}, H5T_NATIVE_INT32}, {0, -1, 1, 2});
  expect_usage_error([&] { DatasetFile f(path); }, {path, "label -1 at row 1 is negative"});
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

}  // namespace
}  // namespace hpctrain
