// hpctrain-data images: an image folder (PNG/BMP/JPEG fixtures, corrupt and non-image files,
// mixed sizes, grey/RGB, every dtype) converted into a data file; sizes and type names.
#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "core/random.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/image_folder.hpp"
#include "data-tools/row_copy.hpp"
#include "data-tools/sample_codec.hpp"
#include "data/dataset_file.hpp"
#include "tools_test_helpers.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using tools_test::expect_usage_error;
using tools_test::fresh_dir;
using tools_test::make_image_folder;
using tools_test::pattern;
using tools_test::read_all;
using tools_test::Rows;
using tools_test::write_png;
using tools_test::write_text;

// ---------------------------------------------------------------- image folders

TEST(DataToolsImages, ListsClassesAndFilesInSortedOrder) {
  const std::string root = make_image_folder("list");
  const ImageFolderListing l = list_image_folder(root);
  EXPECT_EQ(l.class_names, (std::vector<std::string>{"ant", "cat", "dog"}));
  std::vector<std::string> names;
  for (const std::string& f : l.files) names.push_back(fs::path(f).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"a.png", "b.png", "c.png", "1.png", "2.bmp",
                                             "broken.png", "notes.txt", "x.jpg", "y.png"}));
  EXPECT_EQ(l.labels, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 2, 2}));
  ASSERT_EQ(l.stray.size(), 1u);
  EXPECT_EQ(fs::path(l.stray[0]).filename(), "stray.png");
}

TEST(DataToolsImages, ConvertsSkippingUnreadableFiles) {
  const std::string root = make_image_folder("convert");
  const std::string out = (fs::path(root).parent_path() / "ht_tools_convert.h5").string();
  ImageFolderOptions o;
  o.width = 7;
  o.height = 5;
  std::ostringstream log;
  const ImageFolderReport r = convert_image_folder(root, out, o, log);
  EXPECT_EQ(r.files, 9);
  EXPECT_EQ(r.skipped, 2);
  EXPECT_EQ(r.rows(), 7);
  EXPECT_EQ(r.per_class, (std::vector<int64_t>{3, 2, 2}));
  const std::string text = log.str();
  EXPECT_NE(text.find("broken.png: skipped: "), std::string::npos) << text;
  EXPECT_NE(text.find("notes.txt: skipped: "), std::string::npos) << text;
  EXPECT_NE(text.find("stray.png: ignored"), std::string::npos) << text;
  EXPECT_EQ(text.find("hidden"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;

  const Rows rows = read_all(out);
  EXPECT_EQ(rows.shape.n, 7);
  EXPECT_EQ(rows.shape.c, 1);
  EXPECT_EQ(rows.shape.h, 5);
  EXPECT_EQ(rows.shape.w, 7);
  EXPECT_EQ(rows.shape.type, SampleType::kU8);
  EXPECT_EQ(rows.shape.num_classes, 3);
  EXPECT_EQ(rows.shape.class_names, (std::vector<std::string>{"ant", "cat", "dog"}));
  EXPECT_EQ(rows.labels, (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2}));
  EXPECT_NE(read_source_attribute(out).find("image folder"), std::string::npos);
  // Row 3 is the solid red image: luma round(0.299 * 255) = 76 everywhere, resize or not.
  for (int i = 0; i < 35; ++i) EXPECT_NEAR(rows.images[3 * 35 + i], 76, 1) << i;
  // The patterned images are not flat: resizing kept their content.
  const auto [lo, hi] = std::minmax_element(rows.images.begin(), rows.images.begin() + 35);
  EXPECT_GT(*hi - *lo, 50);
}

TEST(DataToolsImages, RgbKeepsPixelsInChannelPlanes) {
  const std::string root = fresh_dir("rgb");
  const std::vector<uint8_t> px = pattern(4, 3, 3, 0);
  write_png(fs::path(root) / "only" / "p.png", 4, 3, 3, px);
  write_png(fs::path(root) / "other" / "q.png", 4, 3, 1, pattern(4, 3, 1, 1));
  const std::string out = root + "/rgb.h5";
  ImageFolderOptions o;
  o.width = 4;  // the input size: no resampling, so pixels must come through exactly
  o.height = 3;
  o.color = ColorMode::kRgb;
  std::ostringstream log;
  convert_image_folder(root, out, o, log);
  const Rows rows = read_all(out);
  ASSERT_EQ(rows.shape.n, 2);
  ASSERT_EQ(rows.shape.c, 3);
  EXPECT_EQ(rows.shape.class_names, (std::vector<std::string>{"only", "other"}));
  for (int ch = 0; ch < 3; ++ch) {
    for (int y = 0; y < 3; ++y) {
      for (int x = 0; x < 4; ++x) {
        ASSERT_EQ(rows.images[static_cast<size_t>((ch * 3 + y) * 4 + x)],
                  px[static_cast<size_t>((y * 4 + x) * 3 + ch)])
            << ch << " " << y << " " << x;
      }
    }
  }
  // The grey image becomes three equal planes.
  const uint8_t* grey = rows.images.data() + 36;
  EXPECT_TRUE(std::equal(grey, grey + 12, grey + 12));
  EXPECT_TRUE(std::equal(grey, grey + 12, grey + 24));
}

TEST(DataToolsImages, FloatTypesHoldValuesOver255) {
  const std::string root = make_image_folder("float");
  ImageFolderOptions o;
  o.width = 6;
  o.height = 6;
  std::ostringstream log;
  const std::string u8 = root + "/../ht_tools_float_u8.h5";
  convert_image_folder(root, u8, o, log);
  const Rows bytes = read_all(u8);
  for (SampleType t : {SampleType::kF16, SampleType::kF32}) {
    o.type = t;
    const std::string path = root + "/../ht_tools_float.h5";
    convert_image_folder(root, path, o, log);
    const Rows rows = read_all(path);
    ASSERT_EQ(rows.shape.type, t);
    ASSERT_EQ(rows.shape.n, bytes.shape.n);
    EXPECT_EQ(rows.labels, bytes.labels);
    float lo = 1, hi = 0;
    for (size_t i = 0; i < bytes.images.size(); ++i) {
      float v = 0;
      if (t == SampleType::kF16) {
        uint16_t h = 0;
        std::memcpy(&h, rows.images.data() + 2 * i, 2);
        v = half_to_float(h);
      } else {
        std::memcpy(&v, rows.images.data() + 4 * i, 4);
      }
      ASSERT_NEAR(v, bytes.images[i] / 255.0f, 5e-4f) << i;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_GE(lo, 0.0f);
    EXPECT_LE(hi, 1.0f);
    EXPECT_GT(hi - lo, 0.3f);
  }
}

TEST(DataToolsImages, SeedShufflesRowsAndThreadsDoNotChangeTheFile) {
  const std::string root = make_image_folder("shuffle");
  std::ostringstream log;
  ImageFolderOptions o;
  o.width = 8;
  o.height = 8;
  const auto convert = [&](const std::string& name) {
    const std::string path = root + "/../ht_tools_shuffle_" + name + ".h5";
    convert_image_folder(root, path, o, log);
    return read_all(path);
  };
  o.threads = 1;
  const Rows sorted1 = convert("sorted1");
  o.threads = 4;
  const Rows sorted4 = convert("sorted4");
  EXPECT_EQ(sorted1.images, sorted4.images);
  EXPECT_EQ(sorted1.labels, sorted4.labels);

  o.shuffle = true;
  o.seed = 11;
  const Rows a = convert("a");
  o.threads = 1;
  const Rows b = convert("b");
  EXPECT_EQ(a.images, b.images);  // same seed, any thread count: same file
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images, sorted1.images);
  // The same samples, only reordered: compare sorted (label, pixels) rows.
  const auto samples = [](const Rows& r) {
    std::multiset<std::pair<int32_t, std::vector<uint8_t>>> s;
    for (int64_t i = 0; i < r.shape.n; ++i) {
      const auto* p = r.images.data() + i * 64;
      s.emplace(r.labels[static_cast<size_t>(i)], std::vector<uint8_t>(p, p + 64));
    }
    return s;
  };
  EXPECT_EQ(samples(a), samples(sorted1));
}

TEST(DataToolsImages, ErrorsNameTheFolderAndLeaveNoFile) {
  const std::string root = fresh_dir("errors");
  ImageFolderOptions o;
  o.width = 4;
  o.height = 4;
  std::ostringstream log;
  const std::string out = root + "/out.h5";
  expect_usage_error([&] { convert_image_folder(root + "/missing", out, o, log); },
                     "no such directory");
  expect_usage_error([&] { convert_image_folder(root, out, o, log); }, "no class sub-folders");
  fs::create_directories(root + "/empty_class");
  expect_usage_error([&] { convert_image_folder(root, out, o, log); }, "no files");
  write_text(fs::path(root) / "c" / "junk.png", "not a png");
  expect_usage_error([&] { convert_image_folder(root, out, o, log); },
                     "no readable images (skipped 1 of 1 files)");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  o.width = 0;
  expect_usage_error([&] { convert_image_folder(root, out, o, log); }, "image size 0x4");
  std::string why;
  uint8_t px[16];
  EXPECT_FALSE(
      decode_image(root + "/c/junk.png", ColorMode::kGray, ResizeMode::kStretch, 4, 4, px, &why));
  EXPECT_FALSE(why.empty());
}

TEST(DataToolsImages, ResizeModesKeepOrChangeTheAspectRatio) {
  // A grey 8x4 image with a distinct value per pixel, made square: crop keeps its middle
  // 4x4 (no scaling needed), pad places it in the middle rows of 8x8 with zeros around.
  const fs::path dir = fs::path(::testing::TempDir()) / "ht_resize_modes";
  std::vector<uint8_t> px(8 * 4);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 8; ++x)
      px[static_cast<size_t>(y * 8 + x)] = static_cast<uint8_t>(10 + y * 8 + x);
  }
  write_png(dir / "wide.png", 8, 4, 1, px);
  const std::string path = (dir / "wide.png").string();
  std::string why;
  std::vector<uint8_t> out(64, 0xEE);
  ASSERT_TRUE(decode_image(path, ColorMode::kGray, ResizeMode::kCrop, 4, 4, out.data(), &why));
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) EXPECT_EQ(out[y * 4 + x], px[y * 8 + x + 2]) << y << "," << x;
  }
  ASSERT_TRUE(decode_image(path, ColorMode::kGray, ResizeMode::kPad, 8, 8, out.data(), &why));
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 8; ++x) {
      EXPECT_EQ(out[y * 8 + x], y >= 2 && y < 6 ? px[(y - 2) * 8 + x] : 0) << y << "," << x;
    }
  }
  // Scaled: pad to 4x4 halves it to 4x2 in rows 1-2; crop to 2x2 scales it to 4x2 and keeps
  // columns 1-2. Stretch fills 4x4 from edge to edge.
  ASSERT_TRUE(decode_image(path, ColorMode::kGray, ResizeMode::kPad, 4, 4, out.data(), &why));
  for (int x = 0; x < 4; ++x) {
    EXPECT_EQ(out[x], 0);
    EXPECT_EQ(out[12 + x], 0);
    EXPECT_GT(out[4 + x], 0);
  }
  ASSERT_TRUE(decode_image(path, ColorMode::kGray, ResizeMode::kStretch, 4, 4, out.data(), &why));
  for (int i = 0; i < 16; ++i) EXPECT_GT(out[i], 0);
  fs::remove_all(dir);
}

TEST(DataToolsImages, ParsesSizesAndTypes) {
  EXPECT_EQ(parse_x_dims("197x148", 2, "--size", "WxH"), (std::vector<int64_t>{197, 148}));
  EXPECT_EQ(parse_x_dims("1x148x197", 3, "--shape", "CxHxW"), (std::vector<int64_t>{1, 148, 197}));
  for (const char* bad : {"", "x", "8", "8x", "0x8", "8x8x8", "-1x8", "8x 8", "99999999x1"}) {
    expect_usage_error([&] { parse_x_dims(bad, 2, "--size", "WxH"); }, "--size");
  }
  EXPECT_EQ(parse_sample_type("float16", "--dtype"), SampleType::kF16);
  expect_usage_error([&] { parse_sample_type("int8", "--dtype"); }, "got 'int8'");
}

TEST(DataToolsImages, EncodesUnitPixelsInEveryType) {
  // Values to clamp, a sweep of [0, 1], and for every normal half below 1 the floats just
  // below, at and above the tie with the next half (where rounding to even decides).
  std::vector<float> v = {-0.5f, 0.0f, 1e-9f, 0x1.0p-15f, 0x1.0p-14f, 0.5f, 1.0f, 1.5f};
  for (uint32_t bits = 0; bits <= 0x3f800000u; bits += 997) v.push_back(std::bit_cast<float>(bits));
  for (uint32_t h = 0x0400; h < 0x3c00; ++h) {
    const uint32_t tie = std::bit_cast<uint32_t>(half_to_float(static_cast<uint16_t>(h))) + 0x1000;
    for (uint32_t bits : {tie - 1, tie, tie + 1}) v.push_back(std::bit_cast<float>(bits));
  }
  std::vector<uint16_t> halves(v.size());
  std::vector<uint8_t> bytes(v.size());
  std::vector<float> floats(v.size());
  encode_unit_pixels(v.data(), v.size(), SampleType::kF16, halves.data());
  encode_unit_pixels(v.data(), v.size(), SampleType::kU8, bytes.data());
  encode_unit_pixels(v.data(), v.size(), SampleType::kF32, floats.data());
  for (size_t i = 0; i < v.size(); ++i) {
    const float c = std::clamp(v[i], 0.0f, 1.0f);
    ASSERT_EQ(halves[i], float_to_half(c)) << v[i];
    ASSERT_EQ(bytes[i], std::lround(c * 255.0f)) << v[i];
    ASSERT_EQ(floats[i], c);
  }
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[7], 255);
  EXPECT_EQ(bytes[5], 128);  // 127.5 rounds up
}

}  // namespace
}  // namespace hpctrain
