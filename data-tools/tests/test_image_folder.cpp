// hpctrain-data images: an image folder (PNG/BMP/JPEG/PNM fixtures, corrupt and non-image
// files, mixed sizes, grey/RGB, every dtype) converted into a data file; crops of thin images,
// outputs that would replace an input; sizes and type names.
#include <gtest/gtest.h>
#include <stb_image_resize.h>
#include <stb_image_write.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
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

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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

// Links: a folder linked inside a class folder is searched (its images were left out
// silently), each folder once (a link back up is no loop); a link that leads nowhere and a
// FIFO are reported and skipped (a FIFO would block the decoder's open).
TEST(DataToolsImages, LinkedFoldersAreSearchedOnceAndWhatCannotBeReadIsReported) {
  const fs::path root = fresh_dir("links");
  const fs::path elsewhere = fs::path(fresh_dir("links_elsewhere"));
  write_png(root / "a" / "1.png", 4, 4, 1, pattern(4, 4, 1, 1));
  write_png(elsewhere / "2.png", 4, 4, 1, pattern(4, 4, 1, 2));
  write_png(elsewhere / "3.png", 4, 4, 1, pattern(4, 4, 1, 3));
  fs::create_directory_symlink(elsewhere, root / "a" / "more");
  fs::create_directory_symlink(root / "a", root / "a" / "up");  // a loop
  fs::create_symlink(root / "a" / "missing.png", root / "a" / "dangling.png");
  ASSERT_EQ(::mkfifo((root / "a" / "pipe.png").c_str(), 0600), 0);
  std::ostringstream log;
  ImageFolderOptions o;
  o.width = o.height = 4;
  const ImageFolderReport r =
      convert_image_folder(root.string(), (root / "out.h5").string(), o, log);
  EXPECT_EQ(r.files, 5) << log.str();
  EXPECT_EQ(r.rows(), 3) << log.str();
  EXPECT_NE(log.str().find("dangling.png: skipped: not a readable image (cannot open"),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("pipe.png: skipped: not a readable image (not a regular file)"),
            std::string::npos)
      << log.str();
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

TEST(DataToolsImages, PnmWhoseRasterIsShortOrWideIsUnreadable) {
  // stb_image 2.27 accepts a P5/P6 raster cut short (the rest is old heap memory) and
  // misreads 16-bit samples; the header is checked first, comments and all.
  const fs::path dir = fresh_dir("pnm");
  const auto decode = [&](const std::string& name, const std::string& bytes, int64_t w, int64_t h,
                          ColorMode color, std::vector<uint8_t>* out, std::string* why) {
    write_text(dir / name, bytes);
    out->assign(static_cast<size_t>(w * h * (color == ColorMode::kRgb ? 3 : 1)), 0xEE);
    return decode_image((dir / name).string(), color, ResizeMode::kStretch, w, h, out->data(), why);
  };
  std::vector<uint8_t> px;
  std::string why;
  const std::string raster = "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c";
  ASSERT_TRUE(decode("comments.pgm", "P5\n# made by hand\n4 # wide\n3\n255\n" + raster, 4, 3,
                     ColorMode::kGray, &px, &why))
      << why;
  EXPECT_EQ(px, std::vector<uint8_t>(raster.begin(), raster.end()));
  ASSERT_TRUE(decode("spaces.ppm", "P6\t2\r\n1#c\n255 " + raster.substr(0, 6) + "more", 2, 1,
                     ColorMode::kRgb, &px, &why))
      << why;
  EXPECT_EQ(px, (std::vector<uint8_t>{1, 4, 2, 5, 3, 6}));  // planar
  // A maxval below 255: samples scaled to 0..255, rounded, as netpbm's tools read them
  // (stb_image returns them as stored); a sample above the maxval is unreadable.
  ASSERT_TRUE(decode("maxval15.pgm", std::string("P5 4 1 15\n\x00\x05\x0a\x0f", 14), 4, 1,
                     ColorMode::kGray, &px, &why))
      << why;
  EXPECT_EQ(px, (std::vector<uint8_t>{0, 85, 170, 255}));
  ASSERT_TRUE(decode("maxval100.ppm", std::string("P6 1 1 100\n\x00\x32\x64", 14), 1, 1,
                     ColorMode::kRgb, &px, &why))
      << why;
  EXPECT_EQ(px, (std::vector<uint8_t>{0, 128, 255}));
  why.clear();
  EXPECT_FALSE(decode("above.pgm", "P5 2 1 15\n\x0f\x10", 2, 1, ColorMode::kGray, &px, &why));
  EXPECT_NE(why.find("PNM: sample 16 above the maxval 15"), std::string::npos) << why;

  why.clear();
  EXPECT_FALSE(decode("empty.pgm", "P5\n64 64\n255\n", 64, 64, ColorMode::kGray, &px, &why));
  EXPECT_NE(why.find("not a readable image (PNM: the header promises 64x64 pixels, 4096 bytes, "
                     "but the file holds 0"),
            std::string::npos)
      << why;
  why.clear();
  EXPECT_FALSE(
      decode("short.pgm", "P5\n4 3\n255\n" + raster.substr(1), 4, 3, ColorMode::kGray, &px, &why));
  EXPECT_NE(why.find("holds 11 after the header"), std::string::npos) << why;
  EXPECT_FALSE(
      decode("short.ppm", "P6 4 3 255\n" + raster + raster, 4, 3, ColorMode::kRgb, &px, &why));
  EXPECT_NE(why.find("36 bytes"), std::string::npos) << why;
  EXPECT_FALSE(decode("wide.pgm", "P5\n2 1\n65535\n" + raster.substr(0, 4), 2, 1, ColorMode::kGray,
                      &px, &why));
  EXPECT_NE(why.find("16-bit"), std::string::npos) << why;
  for (const char* header : {"P5\n2 1\n255#\n", "P5\n0 1\n255\n", "P5 2 1\n", "P5\n2 1\n0\n",
                             "P5\n99999999999 1\n255\n"}) {
    why.clear();
    EXPECT_FALSE(decode("bad.pgm", header + raster, 2, 1, ColorMode::kGray, &px, &why)) << header;
    EXPECT_NE(why.find("not a readable image (PNM header: "), std::string::npos) << why;
  }

  // In a folder: skipped with the other unreadable files, the rest converted.
  const fs::path root = dir / "folder";
  write_text(root / "a" / "t.pgm", "P5\n64 64\n255\n");
  write_png(root / "b" / "ok.png", 4, 4, 1, pattern(4, 4, 1, 0));
  ImageFolderOptions o;
  o.width = 8;
  o.height = 8;
  std::ostringstream log;
  const ImageFolderReport r =
      convert_image_folder(root.string(), (dir / "out.h5").string(), o, log);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.rows(), 1);
  EXPECT_NE(log.str().find("t.pgm: skipped: not a readable image (PNM: "), std::string::npos)
      << log.str();
}

TEST(DataToolsImages, ImageCutShortIsUnreadable) {
  // stb_image 2.27 decoded a BMP or TGA cut in half without an error: the missing rows were
  // zeros, or for an RLE TGA memory it never wrote, different at each run.
  const fs::path dir = fresh_dir("cut");
  const std::vector<uint8_t> img = pattern(16, 16, 3, 9);
  const std::string bmp = (dir / "a.bmp").string(), tga = (dir / "a.tga").string(),
                    raw = (dir / "raw.tga").string();
  ASSERT_NE(stbi_write_bmp(bmp.c_str(), 16, 16, 3, img.data()), 0);
  ASSERT_NE(stbi_write_tga(tga.c_str(), 16, 16, 3, img.data()), 0);  // RLE
  stbi_write_tga_with_rle = 0;
  ASSERT_NE(stbi_write_tga(raw.c_str(), 16, 16, 3, img.data()), 0);
  stbi_write_tga_with_rle = 1;
  std::vector<uint8_t> px(16 * 16 * 3);
  std::string why;
  for (const std::string& path : {bmp, tga, raw}) {
    // Whole, each decodes to the pattern; cut to half or to one byte short, none does.
    ASSERT_TRUE(decode_image(path, ColorMode::kRgb, ResizeMode::kStretch, 16, 16, px.data(), &why))
        << path << ": " << why;
    EXPECT_EQ(px[0], img[0]) << path;
    const uintmax_t size = fs::file_size(path);
    for (const uintmax_t cut : {size / 2, size - 1}) {
      const std::string part =
          (dir / (std::to_string(cut) + "-" + fs::path(path).filename().string())).string();
      fs::copy_file(path, part);
      fs::resize_file(part, cut);
      why.clear();
      EXPECT_FALSE(
          decode_image(part, ColorMode::kRgb, ResizeMode::kStretch, 16, 16, px.data(), &why))
          << part;
      EXPECT_NE(why.find("not a readable image"), std::string::npos) << part << ": " << why;
    }
  }
}

TEST(DataToolsImages, CropMatchesResizingTheWholeImage) {
  // Crop resizes only the part it keeps, by the scale and shift of the whole: the pixels are
  // those of the whole image resized (as stbir_resize_uint8 does) with its middle cut out.
  const fs::path dir = fresh_dir("crop_same");
  struct Case {
    int iw, ih, comp;
    int64_t w, h;
  };
  for (const Case& k : {Case{37, 23, 1, 16, 16}, Case{23, 37, 3, 16, 16}, Case{5, 9, 1, 12, 7},
                        Case{300, 41, 3, 32, 24}, Case{64, 48, 1, 64, 20}}) {
    const std::vector<uint8_t> px = pattern(k.iw, k.ih, k.comp, k.iw);
    const fs::path path = dir / ("p" + std::to_string(k.iw) + ".png");
    write_png(path, k.iw, k.ih, k.comp, px);
    const double scale = std::max(static_cast<double>(k.w) / k.iw, static_cast<double>(k.h) / k.ih);
    const int64_t rw = std::max<int64_t>(k.w, std::llround(k.iw * scale));
    const int64_t rh = std::max<int64_t>(k.h, std::llround(k.ih * scale));
    std::vector<uint8_t> whole = px;  // at the input size, not resampled at all
    if (rw != k.iw || rh != k.ih) {
      whole.resize(static_cast<size_t>(rw * rh * k.comp));
      ASSERT_EQ(stbir_resize_uint8(px.data(), k.iw, k.ih, 0, whole.data(), static_cast<int>(rw),
                                   static_cast<int>(rh), 0, k.comp),
                1);
    }
    std::vector<uint8_t> out(static_cast<size_t>(k.w * k.h * k.comp));
    std::string why;
    ASSERT_TRUE(decode_image(path.string(), k.comp == 1 ? ColorMode::kGray : ColorMode::kRgb,
                             ResizeMode::kCrop, k.w, k.h, out.data(), &why))
        << why;
    const int64_t cx = (rw - k.w) / 2, cy = (rh - k.h) / 2;
    for (int ch = 0; ch < k.comp; ++ch) {
      for (int64_t y = 0; y < k.h; ++y) {
        for (int64_t x = 0; x < k.w; ++x) {
          ASSERT_EQ(out[static_cast<size_t>((ch * k.h + y) * k.w + x)],
                    whole[static_cast<size_t>(((y + cy) * rw + x + cx) * k.comp + ch)])
              << k.iw << "x" << k.ih << " " << ch << " " << y << " " << x;
        }
      }
    }
  }
}

TEST(DataToolsImages, CropOfAThinImageResizesOnlyWhatItKeeps) {
  // 1x20000 (rows 50, then 250 from row 10000 on) cropped to NxN: scaled to cover, it would
  // be N x 20000N (64: 82 MB; 1024: 21 GB, which were allocated before). The middle N rows
  // of that are source rows 9999.5 to 10000.5, between the centres of the last 50 and the
  // first 250: Catmull-Rom's curve, a + (b - a) (t + 3t^2 - 2t^3) / 2, row y at
  // t = (y + 0.5) / N, the same in every column. 1024 is past the shifts that float holds
  // exactly, where only the source rows the filter reaches are resized.
  const fs::path dir = fresh_dir("thin");
  std::string pgm = "P5\n1 20000\n255\n";
  for (int y = 0; y < 20000; ++y) pgm += static_cast<char>(y < 10000 ? 50 : 250);
  write_text(dir / "thin.pgm", pgm);
  for (const int64_t n : {64, 1024}) {
    std::vector<uint8_t> out(static_cast<size_t>(n * n), 0xEE);
    std::string why;
    ASSERT_TRUE(decode_image((dir / "thin.pgm").string(), ColorMode::kGray, ResizeMode::kCrop, n, n,
                             out.data(), &why))
        << why;
    for (int64_t y = 0; y < n; ++y) {
      const uint8_t* row = out.data() + y * n;
      ASSERT_TRUE(std::all_of(row, row + n, [&](uint8_t v) { return v == row[0]; })) << y;
      const double t = (static_cast<double>(y) + 0.5) / static_cast<double>(n);
      ASSERT_NEAR(row[0], 50 + 100 * (t + 3 * t * t - 2 * t * t * t), 1.0) << n << " " << y;
    }
  }
}

TEST(DataToolsImages, OutputNamingAnInputIsRefused) {
  const std::string root = fresh_dir("out_is_input");
  const fs::path first = fs::path(root) / "imgs" / "a" / "1.png";
  write_png(first, 4, 3, 1, pattern(4, 3, 1, 0));
  write_png(fs::path(root) / "imgs" / "b" / "2.png", 4, 3, 1, pattern(4, 3, 1, 1));
  const std::string before = read_bytes(first);
  fs::create_symlink(first, fs::path(root) / "link.h5");
  ImageFolderOptions o;
  o.width = 4;
  o.height = 3;
  std::ostringstream log;
  for (const fs::path& out : {first, fs::path(root) / "link.h5"}) {
    expect_usage_error([&] { convert_image_folder(root + "/imgs", out.string(), o, log); },
                       "output would overwrite the input file");
    EXPECT_EQ(read_bytes(first), before) << out;
    EXPECT_FALSE(fs::exists(out.string() + ".tmp")) << out;
  }
}

TEST(DataToolsImages, OutputWhoseTemporaryIsAnInputIsRefused) {
  // The writer starts by replacing OUT.tmp: an input of that name was lost unread.
  const std::string root = fresh_dir("tmp_is_input");
  const fs::path out = fs::path(root) / "imgs" / "b" / "out.h5";
  const fs::path tmp = out.string() + ".tmp";
  write_png(fs::path(root) / "imgs" / "a" / "1.png", 4, 3, 1, pattern(4, 3, 1, 0));
  write_png(tmp, 4, 3, 1, pattern(4, 3, 1, 1));
  const std::string before = read_bytes(tmp);
  ImageFolderOptions o;
  o.width = 4;
  o.height = 3;
  std::ostringstream log;
  EXPECT_THROW(convert_image_folder(root + "/imgs", out.string(), o, log), UsageError);
  EXPECT_EQ(read_bytes(tmp), before);
  EXPECT_FALSE(fs::exists(out));
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
