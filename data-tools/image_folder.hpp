// Converting an image folder (one sub-folder per class, as torchvision's ImageFolder reads)
// into a data file: decode with stb_image, grey (ITU-R 601 luma) or RGB, resize with
// stb_image_resize, and stream the samples into a DatasetWriter in bounded memory.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "data/dataset_file.hpp"

namespace hpctrain {

enum class ColorMode { kGray, kRgb };
// How an image of another aspect ratio becomes WxH: kStretch scales each side to fit (the
// shape changes); kCrop scales it to cover WxH and cuts the middle out; kPad scales it to
// fit inside WxH and fills the rest with zeros, the image in the middle.
enum class ResizeMode { kStretch, kCrop, kPad };

struct ImageFolderOptions {
  int64_t width = 0, height = 0;  // every sample is resized to this (required, > 0)
  ColorMode color = ColorMode::kGray;
  ResizeMode resize = ResizeMode::kStretch;
  SampleType type = SampleType::kU8;  // uint8 as decoded, float16/float32 as value / 255
  int deflate_level = 0;
  bool shuffle = false;  // rows in a permutation seeded with `seed`, else sorted order
  uint64_t seed = 0;
  int threads = 1;  // decoding threads (the output does not depend on it)
};

// The files of an image folder and their classes, in sorted order: classes by sub-folder
// name, files by path below their class folder (byte order, so independent of the locale).
// Hidden entries (names starting with '.') are left out; class folders are searched
// recursively.
struct ImageFolderListing {
  std::vector<std::string> class_names;
  std::vector<std::string> files;
  std::vector<int32_t> labels;     // class of each file
  std::vector<std::string> stray;  // regular files directly in the folder (no class)
};

// Throws UsageError naming `dir` if it is not a directory or has no class sub-folders.
ImageFolderListing list_image_folder(const std::string& dir);

// Decodes the image at `path` into `chw` (channels * height * width bytes, [C, H, W],
// C = 1 for kGray, 3 for kRgb), resizing it as `resize` says if its size differs. Returns
// false and sets `why` if the file cannot be read as an image (what stb_image reads: PNG,
// JPEG, BMP, GIF, TGA, PSD, HDR, PIC, and binary 8-bit PNM whose raster is all there), or
// if there is not enough memory to decode or resize it. Memory: the decoded image and the
// output (a crop resizes only the part it keeps). Alpha is dropped, not composited.
// Thread-safe.
bool decode_image(const std::string& path, ColorMode color, ResizeMode resize, int64_t width,
                  int64_t height, uint8_t* chw, std::string* why);

struct ImageFolderReport {
  std::vector<std::string> class_names;
  int64_t files = 0;               // files tried
  int64_t skipped = 0;             // files that were not readable images
  std::vector<int64_t> per_class;  // rows written per class
  int64_t rows() const { return files - skipped; }
};

// Converts `dir` into the data file `out` ([N, C, H, W] of options.type, class_names and
// source attributes). Each unreadable file is reported to `log` as one line "PATH: skipped:
// REASON" and left out; so is each class that ends up with no rows. Throws UsageError if
// the folder holds no readable image (and then leaves no file behind).
ImageFolderReport convert_image_folder(const std::string& dir, const std::string& out,
                                       const ImageFolderOptions& options, std::ostream& log);

}  // namespace hpctrain
