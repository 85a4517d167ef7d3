// The data format as training reads it: float16 conversion (exhaustive), DatasetWriter ->
// DatasetFile round trips in every sample type, and the reader's validation errors with
// their messages. The converters' own tests are in data-tools/tests.
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

#include "common/usage_error.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "core/random.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data/dataset_file.hpp"
#include "data/loader.hpp"
#include "h5/h5.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using test::expect_usage_error;

std::string temp_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) / ("ht_data_" + name)).string();
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

// A loader whose shard exceeds its cache reads each batch's rows from the file: the same
// batches, in the same order, as the loader holding the shard in memory, stored bytes or
// decoded, in sequence or in the order batches are requested.
TEST_P(DataRoundTrip, StreamingLoaderMatchesCachedLoader) {
  const RoundTripCase tc = GetParam();
  const std::string path = temp_path(std::string("stream_") + to_string(tc.type) + "_" +
                                     std::to_string(tc.deflate) + ".h5");
  const int64_t n = 45, c = 2, h = 3, w = 5;
  const std::vector<uint8_t> images = random_samples(tc.type, n * c * h * w, 5);
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>((i * 3) % 4);
  DatasetWriterOptions o;
  o.type = tc.type;
  o.c = c;
  o.h = h;
  o.w = w;
  o.num_classes = 4;
  o.chunk_samples = 4;
  o.deflate_level = tc.deflate;
  {
    DatasetWriter writer(path, o);
    writer.append(n, images.data(), labels.data());
    writer.close();
  }
  const DatasetFile file(path);
  const Shard shard{7, 31};  // not the whole file: rows are the shard's
  for (const bool raw : {false, true}) {
    LoaderOptions lo;
    lo.batch = 6;
    lo.epochs = 2;
    lo.shuffle = true;
    lo.seed = 3;
    lo.raw = raw;
    lo.threads = 3;
    LoaderOptions streaming = lo;
    streaming.cache_bytes = 0;
    Loader cached(file, shard, lo), streamed(file, shard, streaming);
    const size_t bytes =
        static_cast<size_t>(c * h * w) * (raw ? sample_type_size(tc.type) : sizeof(float));
    for (int64_t b = 0; b < 2 * cached.batches_per_epoch(); ++b) {
      const BatchBuffer& x = cached.next();
      const BatchBuffer& y = streamed.next();
      ASSERT_EQ(x.size, y.size) << "batch " << b;
      EXPECT_EQ(std::memcmp(x.images.data(), y.images.data(), x.size * bytes), 0)
          << "batch " << b << (raw ? " raw" : " decoded");
      EXPECT_TRUE(std::equal(x.labels.begin(), x.labels.begin() + x.size, y.labels.begin()));
    }
  }
  // On request: batches 5, 0, 3 of the same order, from a cached and a streaming loader,
  // equal the sequential loader's batches 5, 0, 3.
  LoaderOptions lo;
  lo.batch = 6;
  lo.shuffle = true;
  lo.seed = 3;
  LoaderOptions asked = lo;
  asked.on_request = true;
  LoaderOptions asked_streaming = asked;
  asked_streaming.cache_bytes = 0;
  Loader seq(file, shard, lo), a(file, shard, asked), s(file, shard, asked_streaming);
  std::vector<std::vector<float>> want;
  for (int64_t b = 0; b < seq.batches_per_epoch(); ++b) {
    const BatchBuffer& x = seq.next();
    want.emplace_back(x.images.begin(), x.images.begin() + x.size * c * h * w);
  }
  for (int64_t b : {5, 0, 3}) {
    a.request(b);
    s.request(b);
  }
  for (int64_t b : {5, 0, 3}) {
    for (Loader* l : {&a, &s}) {
      const BatchBuffer& x = l->next();
      EXPECT_EQ(std::vector<float>(x.images.begin(), x.images.begin() + x.size * c * h * w),
                want[static_cast<size_t>(b)])
          << "requested batch " << b;
    }
  }
  // A long run, two requests ahead as an asynchronous worker keeps them: the requests of
  // popped slots are dropped on the way, and every batch is still the one asked for.
  LoaderOptions many = asked;
  many.epochs = 60;
  Loader longer(file, shard, many);
  const int64_t batches = seq.batches_per_epoch();
  const auto asked_at = [&](int64_t i) { return (i * 7) % batches; };
  longer.request(asked_at(0));
  longer.request(asked_at(1));
  for (int64_t i = 0; i < 300; ++i) {
    const BatchBuffer& x = longer.next();
    ASSERT_EQ(std::vector<float>(x.images.begin(), x.images.begin() + x.size * c * h * w),
              want[static_cast<size_t>(asked_at(i))])
        << "request " << i;
    longer.request(asked_at(i + 2));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, DataRoundTrip,
    ::testing::Values(RoundTripCase{SampleType::kU8, 0}, RoundTripCase{SampleType::kF16, 0},
                      RoundTripCase{SampleType::kF32, 0}, RoundTripCase{SampleType::kU8, 4},
                      RoundTripCase{SampleType::kF16, 4}, RoundTripCase{SampleType::kF32, 4}),
    [](const auto& p) {
      return std::string(to_string(p.param.type)) + (p.param.deflate > 0 ? "_deflate" : "");
    });

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

// An int64 label past int32 arrives clamped to INT32_MAX: the message says "or more" rather
// than name a value the file does not hold.
TEST(DataFile, WideLabelOutOfRangeIsNotMisreported) {
  const std::string path = temp_path("widelabel.h5");
  for (const int classes : {3, 0}) {
    write_raw(path, {{4, 1, 2, 2}}, {}, {}, classes);
    {
      H5Handle file(HT_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)), H5Fclose);
      const hsize_t n[1] = {4};
      H5Handle space(HT_CHECK_H5(H5Screate_simple(1, n, nullptr)), H5Sclose);
      H5Handle set(HT_CHECK_H5(H5Dcreate2(file.get(), "labels", H5T_STD_I64LE, space.get(),
                                          H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)),
                   H5Dclose);
      const int64_t values[4] = {0, 1, int64_t{1} << 40, 2};
      HT_CHECK_H5(H5Dwrite(set.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values));
    }
    if (classes == 0) {
      expect_usage_error([&] { DatasetFile f(path); },
                         {path, "the largest label is 2147483647 or more"});
      continue;
    }
    const DatasetFile data(path);
    std::vector<uint8_t> images(16);
    std::vector<int32_t> labels(4);
    expect_usage_error([&] { data.read_rows(0, 4, images.data(), labels.data()); },
                       {path, "label 2147483647 or more at row 2 is outside [0, 3)"});
  }
}

// A NaN or an infinity in float samples is bad input: exit 2 naming the file and row, from
// the cached read (read_rows) and the per-batch one (read_row_set) alike.
TEST(DataFile, NonFiniteSampleIsReportedWithItsRow) {
  for (const SampleType type : {SampleType::kF32, SampleType::kF16}) {
    const std::string path = temp_path(std::string("nonfinite_") + to_string(type) + ".h5");
    const int64_t n = 5, elems = 4;
    std::vector<float> values(n * elems, 0.5f);
    values[3 * elems + 2] = type == SampleType::kF32 ? std::nanf("") : INFINITY;
    std::vector<uint8_t> bytes(values.size() * sample_type_size(type));
    if (type == SampleType::kF32) {
      std::memcpy(bytes.data(), values.data(), bytes.size());
    } else {
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t h = float_to_half(values[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    std::vector<int32_t> labels(n, 1);
    DatasetWriterOptions o;
    o.type = type;
    o.c = 1;
    o.h = 2;
    o.w = 2;
    o.num_classes = 2;
    {
      DatasetWriter writer(path, o);
      writer.append(n, bytes.data(), labels.data());
      writer.close();
    }
    const DatasetFile file(path);
    std::vector<uint8_t> out(bytes.size());
    std::vector<int32_t> got(n);
    file.read_rows(0, 3, out.data(), got.data());  // rows before it are fine
    const std::string what = type == SampleType::kF32 ? "(nan)" : "(inf)";
    expect_usage_error([&] { file.read_rows(1, 4, out.data(), got.data()); },
                       {path, "non-finite value " + what + " at row 3"});
    const int64_t rows[3] = {0, 3, 4};
    expect_usage_error([&] { file.read_row_set(rows, 3, out.data(), got.data()); },
                       {path, "non-finite value " + what + " at row 3"});
  }
}

// A damaged file past its header (here a deflated chunk overwritten with zeros) is bad
// input: exit 2 naming the file, not the raw HDF5 failure of an I/O error (exit 1).
TEST(DataFile, DamagedChunkIsReportedAsBadInput) {
  const std::string path = temp_path("damaged_chunk.h5");
  DatasetWriterOptions o;
  o.c = 1;
  o.h = 8;
  o.w = 8;
  o.num_classes = 2;
  o.deflate_level = 6;
  const int64_t n = 16;
  std::vector<uint8_t> images(static_cast<size_t>(n) * 64);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<uint8_t>(i * 7);
  std::vector<int32_t> labels(n, 1);
  {
    DatasetWriter writer(path, o);
    writer.append(n, images.data(), labels.data());
    writer.close();
  }
  haddr_t address = 0;
  hsize_t bytes = 0;
  {
    H5Handle file(HT_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)), H5Fclose);
    H5Handle set(HT_CHECK_H5(H5Dopen2(file.get(), "images", H5P_DEFAULT)), H5Dclose);
    unsigned mask = 0;
    hsize_t offset[4] = {};
    H5Handle space(HT_CHECK_H5(H5Dget_space(set.get())), H5Sclose);
    HT_CHECK_H5(H5Dget_chunk_info(set.get(), space.get(), 0, offset, &mask, &address, &bytes));
  }
  ASSERT_GT(bytes, 4u);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(address));
    const std::string zeros(bytes, '\0');
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  const DatasetFile file(path);  // the header is intact
  std::vector<uint8_t> out(images.size());
  std::vector<int32_t> got(n);
  expect_usage_error([&] { file.read_rows(0, n, out.data(), got.data()); },
                     {path, "damaged or unsupported HDF5 data", "H5Dread"});
  const int64_t rows[2] = {0, 1};
  expect_usage_error([&] { file.read_row_set(rows, 2, out.data(), got.data()); },
                     {path, "damaged or unsupported HDF5 data"});
}

TEST(DataFile, NumClassesFromLabelsWhenNoAttribute) {
  const std::string path = temp_path("scan.h5");
  write_raw(path, {{4, 1, 2, 2}}, {{4}, H5T_STD_I64BE}, {0, 4, 1, 2});
  EXPECT_EQ(DatasetFile(path).shape().num_classes, 5);
  write_raw(path, {{4, 1, 2, 2}}, {{4}, H5T_NATIVE_INT32}, {0, -1, 1, 2});
  expect_usage_error([&] { DatasetFile f(path); }, {path, "label -1 at row 1 is negative"});
}

}  // namespace
}  // namespace hpctrain
