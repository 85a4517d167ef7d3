// Image folder -> data file: list the class folders, then for each batch of files decode
// them on a few threads into preassigned slots (so the output does not depend on the
// thread count), report the unreadable ones in file order and append the rest.
#include "data-tools/image_folder.hpp"

#include <stb_image.h>
#include <stb_image_resize.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iterator>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/random.hpp"
#include "core/utf8.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/progress_note.hpp"
#include "data-tools/row_copy.hpp"
#include "data-tools/sample_codec.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

bool is_hidden(const fs::path& p) { return p.filename().string().starts_with('.'); }

// The files below `class_dir` (recursively, through links to folders too, each folder
// once; skipping hidden entries), sorted by their path relative to it. Anything there but a
// folder is listed, for the decoder to read or report: a link that leads nowhere too.
std::vector<std::string> class_files(const fs::path& class_dir) {
  std::vector<std::pair<std::string, std::string>> found;  // (relative path, path)
  std::set<std::pair<dev_t, ino_t>> folders;               // entered, against link loops
  const auto first_visit = [&](const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && folders.emplace(st.st_dev, st.st_ino).second;
  };
  first_visit(class_dir);
  std::error_code ec;
  fs::recursive_directory_iterator it(class_dir, fs::directory_options::follow_directory_symlink,
                                      ec);
  const fs::recursive_directory_iterator end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code type_ec;  // a link that leads nowhere: no type, listed
    if (it->is_directory(type_ec)) {
      if (is_hidden(p) || !first_visit(p)) it.disable_recursion_pending();
      continue;
    }
    if (!is_hidden(p)) {
      found.emplace_back(p.lexically_relative(class_dir).generic_string(), p.string());
    }
  }
  if (ec) throw UsageError(class_dir.string() + ": cannot list: " + ec.message());
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  files.reserve(found.size());
  for (auto& f : found) files.push_back(std::move(f.second));
  return files;
}

// A `stbi_uc` buffer freed with stbi_image_free.
struct StbiFree {
  void operator()(stbi_uc* p) const { stbi_image_free(p); }
};

// A file stb_image reads through callbacks that notice a decoder asking for bytes past its
// end: stb_image 2.27 decodes a BMP, TGA or GIF cut short without an error, from zeros (an
// RLE TGA from memory it never wrote, different at every run).
struct StbFile {
  // stb_image refills its buffer with reads of this size (sizeof buffer_start), which may
  // come back short at the end of a whole file; any other read is of bytes the decoder needs.
  static constexpr int kRefillBytes = 128;
  std::FILE* f;
  bool past_end = false;

  static int read(void* user, char* data, int size) {
    auto* s = static_cast<StbFile*>(user);
    const size_t n = std::fread(data, 1, static_cast<size_t>(size), s->f);
    if (n < static_cast<size_t>(size) && (n == 0 || size != kRefillBytes)) s->past_end = true;
    return static_cast<int>(n);
  }
  static void skip(void* user, int n) {
    auto* s = static_cast<StbFile*>(user);
    if (std::fseek(s->f, n, SEEK_CUR) != 0) s->past_end = true;
  }
  static int eof(void* user) {
    auto* s = static_cast<StbFile*>(user);
    return std::feof(s->f) != 0 || std::ferror(s->f) != 0;
  }
};

}  // namespace

ImageFolderListing list_image_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw UsageError(dir + ": no such directory");
  if (!fs::is_directory(dir, ec)) throw UsageError(dir + ": not a directory");

  // 1. Class folders and stray files, each sorted by name.
  ImageFolderListing listing;
  std::vector<std::string> class_dirs;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (is_hidden(it->path())) continue;
    if (it->is_directory(ec)) {
      class_dirs.push_back(it->path().filename().string());
    } else if (it->is_regular_file(ec)) {
      listing.stray.push_back(it->path().string());
    }
  }
  if (ec) throw UsageError(dir + ": cannot list: " + ec.message());
  std::sort(class_dirs.begin(), class_dirs.end());
  std::sort(listing.stray.begin(), listing.stray.end());
  if (class_dirs.empty()) {
    throw UsageError(dir + ": no class sub-folders (expected DIR/CLASS/IMAGE files)");
  }

  // 2. Files of each class, class by class.
  for (size_t k = 0; k < class_dirs.size(); ++k) {
    for (std::string& f : class_files(fs::path(dir) / class_dirs[k])) {
      listing.files.push_back(std::move(f));
      listing.labels.push_back(static_cast<int32_t>(k));
    }
  }
  listing.class_names = std::move(class_dirs);
  return listing;
}

namespace {

// A FILE closed with fclose.
struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

bool is_pnm_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// For a binary PGM or PPM ('P5', 'P6', the netpbm formats stb_image reads): "" if the file
// holds the whole raster its header promises, in 8-bit samples, else why not; *maxval is the
// header's (0 for other files, which are left to stb_image). stb_image 2.27 does not notice
// a short raster and returns whatever its buffer held, misreads 16-bit samples, and returns
// samples as stored, not scaled from 0..maxval to 0..255.
// The header as netpbm has it: the magic, then width, height and maxval in decimal, each
// after whitespace and '#' comments (to the end of the line), then exactly one whitespace
// byte; the raster is width * height * channels samples of 1 byte (maxval < 256) or 2.
std::string check_pnm_raster(std::FILE* f, int* maxval) {
  *maxval = 0;
  const int p = std::getc(f), t = std::getc(f);
  if (p != 'P' || (t != '5' && t != '6')) return "";
  const char* names[3] = {"width", "height", "maxval"};
  const int64_t limits[3] = {int64_t{1} << 24, int64_t{1} << 24, 65535};  // stb_image's
  int64_t value[3] = {0, 0, 0};
  int c = std::getc(f);
  for (int k = 0; k < 3; ++k) {
    bool separated = false;
    for (;;) {
      if (is_pnm_space(c)) {
        c = std::getc(f);
      } else if (c == '#') {
        while (c != EOF && c != '\n' && c != '\r') c = std::getc(f);
      } else {
        break;
      }
      separated = true;
    }
    if (!separated || c < '0' || c > '9') return std::string("PNM header: no ") + names[k];
    for (; c >= '0' && c <= '9'; c = std::getc(f)) {
      value[k] = value[k] * 10 + (c - '0');
      if (value[k] > limits[k]) {
        return std::string("PNM header: ") + names[k] + " above " + std::to_string(limits[k]);
      }
    }
    if (value[k] == 0) return std::string("PNM header: ") + names[k] + " 0";
  }
  if (!is_pnm_space(c)) return "PNM header: no whitespace byte after the maxval";
  const long raster_start = std::ftell(f);
  if (raster_start < 0 || std::fseek(f, 0, SEEK_END) != 0) return "PNM: cannot seek in the file";
  const long end = std::ftell(f);
  const int64_t need = value[0] * value[1] * (t == '6' ? 3 : 1) * (value[2] > 255 ? 2 : 1);
  if (end < 0 || end - raster_start < need) {
    return "PNM: the header promises " + std::to_string(value[0]) + "x" + std::to_string(value[1]) +
           " pixels, " + std::to_string(need) + " bytes, but the file holds " +
           std::to_string(std::max<long>(0, end - raster_start)) + " after the header";
  }
  // stb_image 2.27 misreads 16-bit samples: a P5 is widened to 3 channels as if it had 8-bit
  // ones and then read as 16-bit, past the end of its buffer; a P6 keeps the low bytes.
  if (value[2] > 255) {
    return "PNM with 16-bit samples (maxval " + std::to_string(value[2]) +
           "), which stb_image 2.27 misreads";
  }
  *maxval = static_cast<int>(value[2]);
  return "";
}

// Samples of a PNM stored in 0..maxval, scaled to 0..255 (rounded) in place: "" or why not.
std::string scale_pnm_samples(uint8_t* samples, size_t count, int maxval) {
  if (maxval == 255) return "";
  for (size_t i = 0; i < count; ++i) {
    if (samples[i] > maxval) {
      return "PNM: sample " + std::to_string(samples[i]) + " above the maxval " +
             std::to_string(maxval);
    }
    samples[i] = static_cast<uint8_t>((samples[i] * 255 + maxval / 2) / maxval);
  }
  return "";
}

// Source pixels [first, first + count) along one axis, and the shift (in resized pixels) that
// stbir_resize_subpixel needs to give resized pixels [start, start + n) from them.
struct Span {
  int64_t first, count;
  double shift;
};

// The span of a crop along an axis of `size` source pixels scaled by `scale` whose output
// starts at resized pixel `start` and is `n` long: all the source pixels, shifted by `start`
// (what resizing the whole and cutting it gives, in the same float arithmetic), unless
// `start` is so large that float positions near it are off by a good part of a pixel (only
// for images thousands of times longer than wide); then only those the filter reaches.
Span source_span(int64_t size, float scale, int64_t start, int64_t n) {
  if (start < (int64_t{1} << 20)) return {0, size, static_cast<double>(start)};
  // The filters reach 2 pixels either way: source pixels up, output pixels down.
  const double margin = 2.0 / std::min(1.0, static_cast<double>(scale)) + 2.0;
  const auto first = std::clamp<int64_t>(
      static_cast<int64_t>(std::floor(static_cast<double>(start) / scale - margin)), 0, size - 1);
  const auto last = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(static_cast<double>(start + n) / scale + margin)), first + 1,
      size);
  return {first, last - first, static_cast<double>(start) - static_cast<double>(first) * scale};
}

// decode_image without its handling of std::bad_alloc; sets *iw, *ih once decoded.
bool decode_and_fit(const std::string& path, ColorMode color, ResizeMode resize, int64_t width,
                    int64_t height, uint8_t* chw, int* iw, int* ih, std::string* why) {
  // 1. Decode to 8-bit RGB (stb expands grey and palettes, drops alpha, narrows 16-bit), once
  // a PNM's raster is known to be all there and 8-bit.
  std::error_code type_ec;  // (a FIFO would block the open; a link that leads nowhere fails it)
  if (fs::exists(path, type_ec) && !fs::is_regular_file(path, type_ec)) {
    *why = "not a readable image (not a regular file)";
    return false;
  }
  std::unique_ptr<std::FILE, FileClose> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    *why = "not a readable image (cannot open: " +
           std::error_code(errno, std::generic_category()).message() + ")";
    return false;
  }
  int maxval = 0;
  const std::string pnm_problem = check_pnm_raster(file.get(), &maxval);
  if (!pnm_problem.empty()) {
    *why = "not a readable image (" + pnm_problem + ")";
    return false;
  }
  std::rewind(file.get());
  int channels_in_file = 0;
  StbFile reader{file.get()};
  const stbi_io_callbacks io{&StbFile::read, &StbFile::skip, &StbFile::eof};
  std::unique_ptr<stbi_uc, StbiFree> rgb(
      stbi_load_from_callbacks(&io, &reader, iw, ih, &channels_in_file, 3));
  // A skip past the end that no read followed leaves the position beyond the file.
  const long position = std::ftell(file.get());
  const bool skipped_past =
      std::fseek(file.get(), 0, SEEK_END) == 0 && position > std::ftell(file.get());
  file.reset();
  if (!rgb) {
    const char* reason = stbi_failure_reason();  // thread-local in this stb_image
    *why = std::string("not a readable image (stb_image: ") +
           (reason != nullptr && *reason != '\0' ? reason : "no reason given") + ")";
    return false;
  }
  if (reader.past_end || skipped_past) {
    *why = "not a readable image (cut short: the decoder needed bytes past the end of the file)";
    return false;
  }
  const int c = color == ColorMode::kGray ? 1 : 3;
  const size_t in_pixels = static_cast<size_t>(*iw) * static_cast<size_t>(*ih);
  if (maxval != 0) {
    const std::string sample_problem = scale_pnm_samples(rgb.get(), 3 * in_pixels, maxval);
    if (!sample_problem.empty()) {
      *why = "not a readable image (" + sample_problem + ")";
      return false;
    }
  }

  // 2. Grey: ITU-R BT.601 luma in integers, rounded (exact for grey inputs, R = G = B).
  std::vector<uint8_t> luma;
  const uint8_t* src = rgb.get();
  if (c == 1) {
    luma.resize(in_pixels);
    for (size_t i = 0; i < in_pixels; ++i) {
      const uint32_t r = src[3 * i], g = src[3 * i + 1], b = src[3 * i + 2];
      luma[i] = static_cast<uint8_t>((299 * r + 587 * g + 114 * b + 500) / 1000);
    }
    src = luma.data();
    rgb.reset();
  }

  // 3. The size to resize to: WxH (stretch), or the aspect ratio kept, covering WxH (crop)
  // or inside it (pad), at least one pixel a side.
  const int64_t w_in = *iw, h_in = *ih;
  int64_t rw = width, rh = height;
  if (resize != ResizeMode::kStretch) {
    const double sx = static_cast<double>(width) / w_in, sy = static_cast<double>(height) / h_in;
    const double scale = resize == ResizeMode::kCrop ? std::max(sx, sy) : std::min(sx, sy);
    rw = std::max<int64_t>(1, std::llround(static_cast<double>(w_in) * scale));
    rh = std::max<int64_t>(1, std::llround(static_cast<double>(h_in) * scale));
    if (resize == ResizeMode::kCrop) {
      rw = std::max(rw, width);
      rh = std::max(rh, height);
    } else {
      rw = std::min(rw, width);
      rh = std::min(rh, height);
    }
  }
  // Where the output starts in the rw x rh image: the middle of a larger one (crop), or
  // before a smaller one, which then sits in the middle of zeros (pad: cx, cy <= 0).
  int64_t cx = (rw - width) / 2, cy = (rh - height) / 2;
  // Resize (Mitchell filter down, Catmull-Rom up) unless the size already fits; both stay
  // in 8 bits, as the data are 8-bit anyway, so a huge input costs no float copy. A crop
  // resizes only the part it keeps: the rw x rh image shifted by (cx, cy) and cut to WxH,
  // the same pixels as resizing all of it and cutting them out, without the whole (a 1x20000
  // image cropped to 256x256 would be 256x5120000).
  int64_t sw = w_in, sh = h_in;  // the size of `src`
  std::vector<uint8_t> resized;
  if (w_in != rw || h_in != rh) {
    const bool crop = resize == ResizeMode::kCrop;
    sw = crop ? width : rw;
    sh = crop ? height : rh;
    resized.resize(static_cast<size_t>(sw * sh) * static_cast<size_t>(c));
    // The scales stbir_resize_uint8 uses for rw x rh: float(output) / float(input).
    const float scale_x = static_cast<float>(rw) / static_cast<float>(w_in);
    const float scale_y = static_cast<float>(rh) / static_cast<float>(h_in);
    Span x{0, w_in, crop ? static_cast<double>(cx) : 0.0};
    Span y{0, h_in, crop ? static_cast<double>(cy) : 0.0};
    if (crop) {
      x = source_span(w_in, scale_x, cx, width);
      y = source_span(h_in, scale_y, cy, height);
    }
    if (stbir_resize_subpixel(src + (y.first * w_in + x.first) * c, static_cast<int>(x.count),
                              static_cast<int>(y.count), static_cast<int>(w_in * c), resized.data(),
                              static_cast<int>(sw), static_cast<int>(sh), 0, STBIR_TYPE_UINT8, c,
                              -1, 0, STBIR_EDGE_CLAMP, STBIR_EDGE_CLAMP, STBIR_FILTER_DEFAULT,
                              STBIR_FILTER_DEFAULT, STBIR_COLORSPACE_LINEAR, nullptr, scale_x,
                              scale_y, static_cast<float>(x.shift),
                              static_cast<float>(y.shift)) != 1) {
      throw std::bad_alloc();  // its one failure with these arguments: malloc returned null
    }
    src = resized.data();
    if (crop) cx = cy = 0;
  }

  // 4. Interleaved [sh, sw, C] -> planar [C, H, W], from (cx, cy) on.
  const size_t out_pixels = static_cast<size_t>(width * height);
  std::fill_n(chw, out_pixels * static_cast<size_t>(c), uint8_t{0});
  for (int ch = 0; ch < c; ++ch) {
    uint8_t* plane = chw + static_cast<size_t>(ch) * out_pixels;
    for (int64_t y = 0; y < height; ++y) {
      const int64_t sy = y + cy;  // pad: rows above and below the image are outside
      if (sy < 0 || sy >= sh) continue;
      for (int64_t x = 0; x < width; ++x) {
        const int64_t sx = x + cx;
        if (sx < 0 || sx >= sw) continue;
        plane[y * width + x] = src[static_cast<size_t>((sy * sw + sx) * c + ch)];
      }
    }
  }
  return true;
}

// Throws UsageError (check_outputs_differ) if `out` or its temporary `out`.tmp is one of
// `files`: the writer would remove or replace it before it is read. Only the files that can
// be such a file are compared, which costs a path resolution each: those named as either
// (or as what `out` resolves to, and its .tmp), and links; the rest cost one lstat.
void check_output_is_no_input(const std::vector<std::string>& files, const std::string& out) {
  std::error_code ec;
  const std::string name = fs::path(out).filename().string();
  const std::string resolved = fs::weakly_canonical(out, ec).filename().string();
  const std::string names[4] = {name, name + ".tmp", resolved, resolved + ".tmp"};
  for (const std::string& f : files) {
    const std::string file_name = fs::path(f).filename().string();
    if (std::find(std::begin(names), std::end(names), file_name) != std::end(names) ||
        fs::is_symlink(f, ec)) {
      check_outputs_differ(f, {out});
    }
  }
}

}  // namespace

bool decode_image(const std::string& path, ColorMode color, ResizeMode resize, int64_t width,
                  int64_t height, uint8_t* chw, std::string* why) {
  int iw = 0, ih = 0;
  try {
    return decode_and_fit(path, color, resize, width, height, chw, &iw, &ih, why);
  } catch (const std::bad_alloc&) {
    // As stb_image's own "outofmem": this file is skipped, the others go on.
    *why = "not enough memory to decode and resize it";
    if (iw > 0) *why += " (" + std::to_string(iw) + "x" + std::to_string(ih) + " pixels)";
    return false;
  }
}

ImageFolderReport convert_image_folder(const std::string& dir, const std::string& out,
                                       const ImageFolderOptions& options, std::ostream& log) {
  if (options.width < 1 || options.height < 1 || options.width > 65536 || options.height > 65536) {
    throw UsageError(out + ": image size " + std::to_string(options.width) + "x" +
                     std::to_string(options.height) + " must be in [1, 65536] per side");
  }
  const int64_t c = options.color == ColorMode::kGray ? 1 : 3;
  const int64_t elems = c * options.height * options.width;
  check_sample_bytes(elems, options.type, out);
  ImageFolderListing listing = list_image_folder(dir);
  if (listing.files.empty()) throw UsageError(dir + ": no files in the class folders");
  check_output_is_no_input(listing.files, out);
  for (const std::string& f : listing.stray) {
    log << f << ": ignored: not inside a class folder\n";
  }

  // 1. Row order: sorted, or a seeded Fisher-Yates permutation of (file, label) pairs.
  std::vector<int64_t> order(listing.files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  if (options.shuffle) {
    Rng rng(mix_seed(options.seed, 0x696d616765ULL));  // "image": this use's own stream
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.uniform_int(i)]);
  }

  DatasetWriterOptions wo;
  wo.type = options.type;
  wo.c = c;
  wo.h = options.height;
  wo.w = options.width;
  wo.num_classes = static_cast<int>(listing.class_names.size());
  // The file's strings are UTF-8: a folder name in another encoding keeps what it can.
  for (const std::string& name : listing.class_names) wo.class_names.push_back(valid_utf8(name));
  wo.deflate_level = options.deflate_level;
  wo.source = "image folder " + fs::absolute(dir).lexically_normal().string() +
              " (one sub-folder per class), converted by hpctrain-data: " +
              (c == 1 ? "ITU-R 601 luma" : "RGB") + " resized to " + std::to_string(options.width) +
              "x" + std::to_string(options.height) +
              (options.resize == ResizeMode::kCrop  ? " (aspect kept, middle cropped)"
               : options.resize == ResizeMode::kPad ? " (aspect kept, zero-padded)"
                                                    : "") +
              (options.type == SampleType::kU8 ? "" : ", values / 255") +
              (options.shuffle ? "; rows shuffled with seed " + std::to_string(options.seed)
                               : "; rows sorted by class, then file path");
  DatasetWriter writer(out, wo);

  ImageFolderReport report;
  report.class_names = listing.class_names;
  report.per_class.assign(listing.class_names.size(), 0);
  const size_t type_size = sample_type_size(options.type);
  const int64_t batch = stream_batch_rows(elems * static_cast<int64_t>(type_size));
  const int threads = std::clamp(options.threads, 1, 256);
  std::vector<uint8_t> pixels(static_cast<size_t>(batch * elems));
  std::vector<uint8_t> samples(options.type == SampleType::kU8 ? 0 : pixels.size() * type_size);
  std::vector<float> unit(options.type == SampleType::kU8 ? 0 : static_cast<size_t>(elems));
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<std::string> why(static_cast<size_t>(batch));
  std::vector<char> ok(static_cast<size_t>(batch));

  ProgressNote note("converting " + dir, static_cast<int64_t>(order.size()));
  for (int64_t start = 0; start < static_cast<int64_t>(order.size()); start += batch) {
    note.update(start);
    const int64_t count = std::min<int64_t>(batch, static_cast<int64_t>(order.size()) - start);
    // 2. Decode the batch: slot i holds file order[start + i], whichever thread takes it.
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr failure;  // written once, by the thread that set `failed`
    auto work = [&] {
      for (int64_t i = next++; i < count && !failed; i = next++) {
        const auto slot = static_cast<size_t>(i);
        try {
          ok[slot] = decode_image(listing.files[static_cast<size_t>(order[start + i])],
                                  options.color, options.resize, options.width, options.height,
                                  pixels.data() + slot * static_cast<size_t>(elems), &why[slot]);
        } catch (...) {
          if (!failed.exchange(true)) failure = std::current_exception();
        }
      }
    };
    {
      std::vector<std::jthread> pool;
      for (int t = 1; t < std::min<int64_t>(threads, count); ++t) pool.emplace_back(work);
      work();
    }  // joins
    if (failure) std::rethrow_exception(failure);

    // 3. Compact the readable slots in order, reporting the others in file order.
    int64_t kept = 0;
    for (int64_t i = 0; i < count; ++i) {
      const auto slot = static_cast<size_t>(i);
      const size_t file = static_cast<size_t>(order[start + i]);
      if (!ok[slot]) {
        log << one_line(listing.files[file] + ": skipped: " + why[slot]) << "\n";
        ++report.skipped;
        continue;
      }
      if (kept != i) {
        std::copy_n(pixels.data() + slot * static_cast<size_t>(elems), elems,
                    pixels.data() + static_cast<size_t>(kept * elems));
      }
      labels[static_cast<size_t>(kept)] = listing.labels[file];
      ++report.per_class[static_cast<size_t>(listing.labels[file])];
      ++kept;
    }
    report.files += count;

    // 4. Encode (float types hold value / 255) and append.
    const void* data = pixels.data();
    if (options.type != SampleType::kU8) {
      for (int64_t r = 0; r < kept; ++r) {
        const uint8_t* p = pixels.data() + static_cast<size_t>(r * elems);
        for (int64_t e = 0; e < elems; ++e) unit[static_cast<size_t>(e)] = p[e] / 255.0f;
        encode_unit_pixels(unit.data(), static_cast<size_t>(elems), options.type,
                           samples.data() + static_cast<size_t>(r * elems) * type_size);
      }
      data = samples.data();
    }
    writer.append(kept, data, labels.data());
  }

  if (report.rows() == 0) {
    throw UsageError(dir + ": no readable images (skipped " + std::to_string(report.skipped) +
                     " of " + std::to_string(report.files) + " files)");
  }
  for (size_t k = 0; k < report.per_class.size(); ++k) {
    if (report.per_class[k] == 0) {
      log << dir << ": class '" << report.class_names[k] << "' has no readable images\n";
    }
  }
  writer.close();
  return report;
}

}  // namespace hpctrain
