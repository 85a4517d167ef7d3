// hpctrain-data's tools: image folder conversion (PNG/BMP/JPEG fixtures written with
// stb_image_write, corrupt and non-image files, mixed sizes, grey/RGB, every dtype), the
// stratified split, contiguous shards, the synthetic set, and a folder -> split -> shard
// -> Loader pipeline.
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
#include "data/dataset_file.hpp"
#include "data/dataset_writer.hpp"
#include "data/h5.hpp"
#include "data/image_folder.hpp"
#include "data/loader.hpp"
#include "data/row_copy.hpp"
#include "data/sample_codec.hpp"
#include "data/shard.hpp"
#include "data/split.hpp"
#include "data/synth.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

// A fresh, empty directory for one test.
std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("ht_tools_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void expect_usage_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no UsageError thrown; expected one mentioning '" << part << "'";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
        << "message '" << e.what() << "' lacks '" << part << "'";
  }
}

// Pixels of a w x h image with `comp` interleaved channels: a pattern that differs per
// pixel and channel, offset by `seed`.
std::vector<uint8_t> pattern(int w, int h, int comp, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(w * h * comp));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 37 + seed * 11) % 256);
  return p;
}

void write_png(const fs::path& path, int w, int h, int comp, const std::vector<uint8_t>& px) {
  fs::create_directories(path.parent_path());
  ASSERT_NE(stbi_write_png(path.c_str(), w, h, comp, px.data(), w * comp), 0) << path;
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// The folder every image test uses: 3 classes given out of order, 9 candidate files of
// which 2 are unreadable, plus entries that must be ignored.
//   ant/a.png (grey 10x8), ant/b.png (RGB 16x12), ant/sub/c.png (RGBA 5x5, nested)
//   cat/1.png (solid red RGB 20x20), cat/2.bmp (grey 6x6), cat/broken.png (truncated),
//   cat/notes.txt (text), cat/.hidden.png (ignored)
//   dog/x.jpg (RGB 9x7), dog/y.png (grey+alpha 12x12)
//   stray.png (no class: ignored), .git/ (hidden: ignored)
std::string make_image_folder(const std::string& name) {
  const fs::path root = fresh_dir(name);
  write_png(root / "dog" / "y.png", 12, 12, 2, pattern(12, 12, 2, 7));
  fs::create_directories(root / "dog");
  EXPECT_NE(
      stbi_write_jpg((root / "dog" / "x.jpg").c_str(), 9, 7, 3, pattern(9, 7, 3, 6).data(), 90), 0);
  write_png(root / "ant" / "a.png", 10, 8, 1, pattern(10, 8, 1, 1));
  write_png(root / "ant" / "b.png", 16, 12, 3, pattern(16, 12, 3, 2));
  write_png(root / "ant" / "sub" / "c.png", 5, 5, 4, pattern(5, 5, 4, 3));
  std::vector<uint8_t> red(20 * 20 * 3, 0);
  for (size_t i = 0; i < red.size(); i += 3) red[i] = 255;
  write_png(root / "cat" / "1.png", 20, 20, 3, red);
  EXPECT_NE(stbi_write_bmp((root / "cat" / "2.bmp").c_str(), 6, 6, 1, pattern(6, 6, 1, 4).data()),
            0);
  // A truncated PNG: the signature and header survive, the image data do not.
  write_png(root / "cat" / "full.png", 32, 32, 3, pattern(32, 32, 3, 5));
  {
    std::ifstream in(root / "cat" / "full.png", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    write_text(root / "cat" / "broken.png", bytes.substr(0, bytes.size() / 2));
    fs::remove(root / "cat" / "full.png");
  }
  write_text(root / "cat" / "notes.txt", "these are not pixels\n");
  write_png(root / "cat" / ".hidden.png", 4, 4, 1, pattern(4, 4, 1, 8));
  write_png(root / "stray.png", 4, 4, 1, pattern(4, 4, 1, 9));
  write_png(root / ".git" / "z.png", 4, 4, 1, pattern(4, 4, 1, 10));
  return root.string();
}

struct Rows {
  DatasetShape shape;
  std::vector<uint8_t> images;  // stored type
  std::vector<int32_t> labels;
};

Rows read_all(const std::string& path) {
  const DatasetFile f(path);
  Rows r;
  r.shape = f.shape();
  r.images.resize(static_cast<size_t>(r.shape.n) * r.shape.sample_bytes());
  r.labels.resize(static_cast<size_t>(r.shape.n));
  f.read_rows(0, r.shape.n, r.images.data(), r.labels.data());
  return r;
}

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
  EXPECT_FALSE(decode_image(root + "/c/junk.png", ColorMode::kGray, 4, 4, px, &why));
  EXPECT_FALSE(why.empty());
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

// ---------------------------------------------------------------- split

// A float32 file whose single pixel holds the row index, with uneven classes: class k has
// 10 + 7k rows, interleaved (label of row i cycles with gaps) so classes are not blocks.
std::string make_indexed_file(const std::string& path, int classes) {
  DatasetWriterOptions o;
  o.type = SampleType::kF32;
  o.num_classes = classes;
  // (Appending, not "k" + to_string(k): GCC 12 warns falsely on that, bug 105329.)
  for (int k = 0; k < classes; ++k)
    o.class_names.push_back(std::string("k").append(std::to_string(k)));
  o.source = "indexed rows";
  std::vector<int32_t> labels;
  for (int k = 0; k < classes; ++k) labels.insert(labels.end(), 10 + 7 * k, k);
  Rng rng(5);
  for (size_t i = labels.size(); i > 1; --i) std::swap(labels[i - 1], labels[rng.uniform_int(i)]);
  std::vector<float> index(labels.size());
  std::iota(index.begin(), index.end(), 0.0f);
  DatasetWriter w(path, o);
  w.append(static_cast<int64_t>(labels.size()), index.data(), labels.data());
  w.close();
  return path;
}

std::vector<float> row_ids(const Rows& r) {
  std::vector<float> ids(static_cast<size_t>(r.shape.n));
  std::memcpy(ids.data(), r.images.data(), ids.size() * sizeof(float));
  return ids;
}

TEST(DataToolsSplit, ApportionAddsUpByLargestRemainder) {
  EXPECT_EQ(apportion(100, {85, 2, 13}), (std::vector<int64_t>{85, 2, 13}));
  EXPECT_EQ(apportion(10, {85, 2, 13}), (std::vector<int64_t>{9, 0, 1}));
  EXPECT_EQ(apportion(7, {1, 1, 1}), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(apportion(0, {3, 1}), (std::vector<int64_t>{0, 0}));
  for (int64_t n = 0; n < 200; ++n) {
    const std::vector<int64_t> c = apportion(n, {85, 2, 13});
    ASSERT_EQ(c[0] + c[1] + c[2], n);
    for (size_t p = 0; p < 3; ++p) {
      const double exact = static_cast<double>(n) * std::vector<double>{0.85, 0.02, 0.13}[p];
      ASSERT_LT(std::abs(static_cast<double>(c[p]) - exact), 1.0) << n << " " << p;
    }
  }
}

TEST(DataToolsSplit, StratifiedDisjointCompleteAndSeeded) {
  const std::string dir = fresh_dir("split");
  const std::string input = make_indexed_file(dir + "/in.h5", 5);  // 10..38 rows per class
  SplitOptions o;
  o.weights = {85, 2, 13};
  o.names = default_split_names(3);
  o.seed = 9;
  const SplitReport report = split_data_file(input, dir + "/s", o);
  ASSERT_EQ(report.paths,
            (std::vector<std::string>{dir + "/s-train.h5", dir + "/s-val.h5", dir + "/s-test.h5"}));
  const Rows all = read_all(input);
  std::vector<int> seen(static_cast<size_t>(all.shape.n), 0);
  for (size_t p = 0; p < 3; ++p) {
    const Rows part = read_all(report.paths[p]);
    EXPECT_EQ(part.shape.type, SampleType::kF32);
    EXPECT_EQ(part.shape.class_names, all.shape.class_names);
    EXPECT_EQ(part.shape.num_classes, 5);
    const std::string source = read_source_attribute(report.paths[p]);
    EXPECT_EQ(source.rfind("indexed rows; part '" + o.names[p] + "'", 0), 0u) << source;
    const std::vector<float> ids = row_ids(part);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));  // source order kept
    std::vector<int64_t> per_class(5, 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto row = static_cast<size_t>(ids[i]);
      ++seen[row];
      EXPECT_EQ(part.labels[i], all.labels[row]);  // the label travelled with its row
      ++per_class[static_cast<size_t>(part.labels[i])];
    }
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(per_class[static_cast<size_t>(k)], apportion(10 + 7 * k, o.weights)[p])
          << "part " << p << " class " << k;
    }
    EXPECT_EQ(per_class, report.per_class[p]);
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));

  // Determinism: the same seed, the same parts; another seed, other rows.
  std::vector<int32_t> labels = all.labels;
  EXPECT_EQ(stratified_parts(labels, 5, o.weights, 9), stratified_parts(labels, 5, o.weights, 9));
  EXPECT_NE(stratified_parts(labels, 5, o.weights, 9), stratified_parts(labels, 5, o.weights, 10));
  const SplitReport again = split_data_file(input, dir + "/t", o);
  EXPECT_EQ(read_all(again.paths[1]).images, read_all(report.paths[1]).images);
}

TEST(DataToolsSplit, RejectsEmptyPartsBadWeightsAndOverwritingTheInput) {
  const std::string dir = fresh_dir("split_errors");
  const std::string input = make_indexed_file(dir + "/in.h5", 2);  // 10 + 17 rows
  SplitOptions o;
  o.weights = {1000, 1};
  o.names = {"train", "test"};
  expect_usage_error([&] { split_data_file(input, dir + "/s", o); }, "part 'test' would be empty");
  EXPECT_FALSE(fs::exists(dir + "/s-train.h5"));
  // An output that is the input (here PREFIX-train.h5) is refused before anything is written.
  const std::string clash = make_indexed_file(dir + "/s-train.h5", 2);
  o.weights = {1, 1};
  expect_usage_error([&] { split_data_file(clash, dir + "/./s", o); }, "overwrite the input");
  EXPECT_FALSE(fs::exists(dir + "/s-test.h5"));
  EXPECT_EQ(parse_split_weights("85,2,13", "--ratios"), (std::vector<int64_t>{85, 2, 13}));
  for (const char* bad : {"", "85", "85,,13", "85,0", "a,b", "1,-2", "85,2,13,"}) {
    expect_usage_error([&] { parse_split_weights(bad, "--ratios"); }, "--ratios");
  }
  EXPECT_EQ(parse_split_names("a,b-c", 2, "--names"), (std::vector<std::string>{"a", "b-c"}));
  expect_usage_error([&] { parse_split_names("a,a", 2, "--names"); }, "repeats");
  expect_usage_error([&] { parse_split_names("a/b,c", 2, "--names"); }, "letters");
  expect_usage_error([&] { parse_split_names("a", 2, "--names"); }, "1 names for 2 parts");
  EXPECT_EQ(default_split_names(2), (std::vector<std::string>{"train", "test"}));
  EXPECT_EQ(default_split_names(4)[3], "part3");
}

// ---------------------------------------------------------------- shard

TEST(DataToolsShard, ContiguousCoverWithSizesWithinOne) {
  EXPECT_EQ(shard_bounds(10, 3), (std::vector<int64_t>{0, 4, 7, 10}));
  EXPECT_EQ(shard_bounds(9, 3), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(shard_output_path("d/p", 2, 8), "d/p-00002-of-00008.h5");
  EXPECT_EQ(shard_output_path("p", 3, 123456), "p-000003-of-123456.h5");

  const std::string dir = fresh_dir("shard");
  const std::string input = make_indexed_file(dir + "/in.h5", 3);  // 10 + 17 + 24 = 51 rows
  const ShardReport r = shard_data_file(input, dir + "/sh", 4, 0);
  ASSERT_EQ(r.paths.size(), 4u);
  const Rows all = read_all(input);
  float next = 0;
  for (size_t i = 0; i < 4; ++i) {
    const Rows part = read_all(r.paths[i]);
    EXPECT_EQ(part.shape.n, i < 3 ? 13 : 12);  // 51 = 13 + 13 + 13 + 12
    EXPECT_EQ(part.shape.class_names, all.shape.class_names);
    for (size_t j = 0; j < part.labels.size(); ++j) {
      ASSERT_EQ(row_ids(part)[j], next);
      EXPECT_EQ(part.labels[j], all.labels[static_cast<size_t>(next)]);
      ++next;
    }
    EXPECT_NE(read_source_attribute(r.paths[i]).find("shard " + std::to_string(i) + " of 4"),
              std::string::npos);
  }
  EXPECT_EQ(next, 51.0f);
  expect_usage_error([&] { shard_data_file(input, dir + "/sh", 52, 0); }, "would leave some");
  expect_usage_error([&] { shard_data_file(input, dir + "/sh", 0, 0); }, "at least 1");
  expect_usage_error([&] { shard_data_file(dir + "/none.h5", dir + "/sh", 2, 0); }, "no such file");
}

// ---------------------------------------------------------------- synth

TEST(DataToolsSynth, DeterministicBalancedAndInRange) {
  const std::string dir = fresh_dir("synth");
  SynthOptions o;
  o.n = 50;
  o.c = 2;
  o.h = 20;
  o.w = 24;
  o.classes = 3;
  o.seed = 4;
  for (SampleType t : {SampleType::kU8, SampleType::kF16, SampleType::kF32}) {
    o.type = t;
    synth_data_file(dir + "/a.h5", o);
    synth_data_file(dir + "/b.h5", o);
    const Rows a = read_all(dir + "/a.h5"), b = read_all(dir + "/b.h5");
    EXPECT_EQ(a.shape.type, t);
    EXPECT_EQ(a.shape.n, 50);
    EXPECT_EQ(a.shape.c, 2);
    EXPECT_EQ(a.shape.h, 20);
    EXPECT_EQ(a.shape.w, 24);
    EXPECT_EQ(a.shape.class_names, (std::vector<std::string>{"class0", "class1", "class2"}));
    EXPECT_EQ(a.images, b.images);
    EXPECT_EQ(a.labels, b.labels);
    for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(a.labels[static_cast<size_t>(i)], i % 3);
  }
  o.threads = 3;  // rows made in any order by several threads: the same file
  synth_data_file(dir + "/t.h5", o);
  EXPECT_EQ(read_all(dir + "/t.h5").images, read_all(dir + "/a.h5").images);
  o.seed = 5;
  synth_data_file(dir + "/c.h5", o);
  EXPECT_NE(read_all(dir + "/c.h5").images, read_all(dir + "/a.h5").images);

  // A row does not depend on which rows were made before it.
  const SynthGenerator gen(o);
  std::vector<float> x(2 * 20 * 24), y(x.size());
  gen.sample(17, x.data());
  gen.sample(3, y.data());
  gen.sample(17, y.data());
  EXPECT_EQ(x, y);
  EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](float v) { return v >= 0 && v <= 1; }));

  expect_usage_error([&] { o.n = 0, synth_data_file(dir + "/d.h5", o); }, "--n");
  o.n = 1;
  o.c = 3;
  o.h = o.w = 20000;  // 2.4 GB a sample
  expect_usage_error([&] { synth_data_file(dir + "/d.h5", o); }, "over the 1 GiB limit");
  o.c = 1;
  o.n = 5;
  expect_usage_error([&] { o.classes = 1, synth_data_file(dir + "/d.h5", o); }, "--classes");
}

// Learnable: class means differ, and a nearest-class-mean rule fitted on half the rows
// classifies the other half almost perfectly.
TEST(DataToolsSynth, ClassesDifferEnoughToLearn) {
  SynthOptions o;
  o.n = 400;
  o.c = 1;
  o.h = 32;
  o.w = 40;
  o.classes = 4;
  o.seed = 2;
  const SynthGenerator gen(o);
  const size_t elems = 32 * 40;
  std::vector<std::vector<double>> mean(4, std::vector<double>(elems, 0.0));
  std::vector<float> px(elems);
  for (int64_t i = 0; i < 200; ++i) {
    gen.sample(i, px.data());
    for (size_t e = 0; e < elems; ++e) mean[static_cast<size_t>(gen.label(i))][e] += px[e] / 50;
  }
  const auto distance = [&](const std::vector<double>& m, const std::vector<float>& v) {
    double d = 0;
    for (size_t e = 0; e < elems; ++e) d += (m[e] - v[e]) * (m[e] - v[e]);
    return d;
  };
  for (size_t a = 0; a < 4; ++a) {
    for (size_t b = a + 1; b < 4; ++b) {
      double d = 0;
      for (size_t e = 0; e < elems; ++e) d += std::abs(mean[a][e] - mean[b][e]);
      EXPECT_GT(d / elems, 0.05) << a << " vs " << b;  // mean absolute pixel difference
    }
  }
  int correct = 0;
  for (int64_t i = 200; i < 400; ++i) {
    gen.sample(i, px.data());
    size_t best = 0;
    for (size_t k = 1; k < 4; ++k) {
      if (distance(mean[k], px) < distance(mean[best], px)) best = k;
    }
    correct += static_cast<int>(best) == gen.label(i);
  }
  EXPECT_GE(correct, 190) << "nearest class mean: " << correct << " of 200";
}

// ---------------------------------------------------------------- pipeline

// The tools chained as a user would: folder -> file -> split -> shard, and the Loader
// (what training reads through) serves batches of the right shape and range.
TEST(DataToolsPipeline, FolderToSplitToShardToLoader) {
  const std::string root = fresh_dir("pipeline_images");
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 12; ++i) {
      const int w = 8 + (i % 3) * 5, h = 6 + (i % 4) * 3;  // mixed sizes
      write_png(fs::path(root) / std::string("c").append(std::to_string(k)) /
                    std::to_string(i).append(".png"),
                w, h, 3, pattern(w, h, 3, k * 100 + i));
    }
  }
  write_text(fs::path(root) / "c1" / "README", "not an image");
  const std::string dir = fresh_dir("pipeline");
  ImageFolderOptions io;
  io.width = 12;
  io.height = 10;
  io.type = SampleType::kF16;
  io.shuffle = true;
  io.seed = 3;
  std::ostringstream log;
  const ImageFolderReport r = convert_image_folder(root, dir + "/all.h5", io, log);
  EXPECT_EQ(r.files, 37);
  EXPECT_EQ(r.skipped, 1);

  SplitOptions so;
  so.weights = {2, 1};
  so.names = {"train", "test"};
  so.seed = 1;
  const SplitReport sr = split_data_file(dir + "/all.h5", dir + "/set", so);
  EXPECT_EQ(sr.rows, (std::vector<int64_t>{24, 12}));
  const ShardReport shr = shard_data_file(sr.paths[0], dir + "/train", 2, 1);

  const DatasetFile shard(shr.paths[1]);
  EXPECT_EQ(shard.shape().n, 12);
  EXPECT_EQ(shard.shape().type, SampleType::kF16);
  LoaderOptions lo;
  lo.batch = 5;
  lo.threads = 1;
  Loader loader(shard, Shard{0, shard.shape().n}, lo);
  int64_t seen = 0;
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    const BatchBuffer& batch = loader.next();
    for (size_t i = 0; i < static_cast<size_t>(batch.size) * 120; ++i) {
      ASSERT_GE(batch.images[i], 0.0f);
      ASSERT_LE(batch.images[i], 1.0f);
    }
    seen += batch.size;
  }
  EXPECT_EQ(seen, 12);

  // Raw mode (a device backend's loaders): the stored bytes of the same batches, which
  // decode_samples turns into exactly the floats the converting loader gives.
  LoaderOptions raw_opts = lo;
  raw_opts.raw = true;
  Loader floats(shard, Shard{0, shard.shape().n}, lo);
  Loader raw(shard, Shard{0, shard.shape().n}, raw_opts);
  for (int64_t b = 0; b < floats.batches_per_epoch(); ++b) {
    const BatchBuffer& f = floats.next();
    const BatchBuffer& rb = raw.next();
    ASSERT_EQ(f.size, rb.size);
    std::vector<float> decoded(static_cast<size_t>(rb.size) * 120);
    decode_samples(rb.images.data(), SampleType::kF16, decoded.size(), decoded.data());
    for (size_t i = 0; i < decoded.size(); ++i) ASSERT_EQ(decoded[i], f.images[i]) << i;
    for (int64_t i = 0; i < f.size; ++i) ASSERT_EQ(f.labels[i], rb.labels[i]);
  }
}

}  // namespace
}  // namespace hpctrain
