// Fixtures shared by the tests of hpctrain-data's tools: temporary folders, PNG/BMP/JPEG
// images written with stb_image_write (the image folder every image test converts), and a
// whole data file read back.
#pragma once

#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "common/usage_error.hpp"
#include "data/dataset_file.hpp"

namespace hpctrain::tools_test {

namespace fs = std::filesystem;

// A fresh, empty directory for one test.
inline std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("ht_tools_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

inline void expect_usage_error(const std::function<void()>& f, const std::string& part) {
  test::expect_usage_error(f, {part});
}

// Pixels of a w x h image with `comp` interleaved channels: a pattern that differs per
// pixel and channel, offset by `seed`.
inline std::vector<uint8_t> pattern(int w, int h, int comp, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(w * h * comp));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 37 + seed * 11) % 256);
  return p;
}

inline void write_png(const fs::path& path, int w, int h, int comp,
                      const std::vector<uint8_t>& px) {
  fs::create_directories(path.parent_path());
  ASSERT_NE(stbi_write_png(path.c_str(), w, h, comp, px.data(), w * comp), 0) << path;
}

inline void write_text(const fs::path& path, const std::string& text) {
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
inline std::string make_image_folder(const std::string& name) {
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

inline Rows read_all(const std::string& path) {
  const DatasetFile f(path);
  Rows r;
  r.shape = f.shape();
  r.images.resize(static_cast<size_t>(r.shape.n) * r.shape.sample_bytes());
  r.labels.resize(static_cast<size_t>(r.shape.n));
  f.read_rows(0, r.shape.n, r.images.data(), r.labels.data());
  return r;
}

}  // namespace hpctrain::tools_test
