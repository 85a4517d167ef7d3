// Image folder -> data file: list the class folders, then for each batch of files decode
// them on a few threads into preassigned slots (so the output does not depend on the
// thread count), report the unreadable ones in file order and append the rest.
#include "data-tools/image_folder.hpp"

#include <stb_image.h>
#include <stb_image_resize.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <filesystem>
#include <memory>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/progress_note.hpp"
#include "data-tools/sample_codec.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

bool is_hidden(const fs::path& p) { return p.filename().string().starts_with('.'); }

// Regular files below `class_dir` (recursively, skipping hidden entries), sorted by their
// path relative to it.
std::vector<std::string> class_files(const fs::path& class_dir) {
  std::vector<std::pair<std::string, std::string>> found;  // (relative path, path)
  std::error_code ec;
  fs::recursive_directory_iterator it(class_dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (is_hidden(p)) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) {
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

bool decode_image(const std::string& path, ColorMode color, ResizeMode resize, int64_t width,
                  int64_t height, uint8_t* chw, std::string* why) {
  // 1. Decode to 8-bit RGB (stb expands grey and palettes, drops alpha, narrows 16-bit).
  int iw = 0, ih = 0, channels_in_file = 0;
  std::unique_ptr<stbi_uc, StbiFree> rgb(stbi_load(path.c_str(), &iw, &ih, &channels_in_file, 3));
  if (!rgb) {
    const char* reason = stbi_failure_reason();  // thread-local in this stb_image
    *why = std::string("not a readable image (stb_image: ") +
           (reason != nullptr ? reason : "no reason given") + ")";
    return false;
  }
  const int c = color == ColorMode::kGray ? 1 : 3;
  const size_t in_pixels = static_cast<size_t>(iw) * static_cast<size_t>(ih);

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
  int64_t rw = width, rh = height;
  if (resize != ResizeMode::kStretch) {
    const double sx = static_cast<double>(width) / iw, sy = static_cast<double>(height) / ih;
    const double scale = resize == ResizeMode::kCrop ? std::max(sx, sy) : std::min(sx, sy);
    rw = std::max<int64_t>(1, std::llround(iw * scale));
    rh = std::max<int64_t>(1, std::llround(ih * scale));
    if (resize == ResizeMode::kCrop) {
      rw = std::max(rw, width);
      rh = std::max(rh, height);
    } else {
      rw = std::min(rw, width);
      rh = std::min(rh, height);
    }
  }
  // Resize (Mitchell filter down, Catmull-Rom up) unless the size already fits; both stay
  // in 8 bits, as the data are 8-bit anyway, so a huge input costs no float copy.
  std::vector<uint8_t> resized;
  if (iw != rw || ih != rh) {
    resized.resize(static_cast<size_t>(rw * rh) * static_cast<size_t>(c));
    if (stbir_resize_uint8(src, iw, ih, 0, resized.data(), static_cast<int>(rw),
                           static_cast<int>(rh), 0, c) != 1) {
      throw Error(path + ": stbir_resize_uint8 failed (out of memory?) resizing " +
                  std::to_string(iw) + "x" + std::to_string(ih));
    }
    src = resized.data();
  }

  // 4. Interleaved [rh, rw, C] -> planar [C, H, W]: the middle of a larger image (crop),
  // or the image in the middle of zeros (pad).
  const size_t out_pixels = static_cast<size_t>(width * height);
  std::fill_n(chw, out_pixels * static_cast<size_t>(c), uint8_t{0});
  const int64_t cx = (rw - width) / 2, cy = (rh - height) / 2;  // crop: where the cut starts
  for (int ch = 0; ch < c; ++ch) {
    uint8_t* plane = chw + static_cast<size_t>(ch) * out_pixels;
    for (int64_t y = 0; y < height; ++y) {
      const int64_t sy = y + cy;  // pad: cy <= 0, so rows above and below are outside
      if (sy < 0 || sy >= rh) continue;
      for (int64_t x = 0; x < width; ++x) {
        const int64_t sx = x + cx;
        if (sx < 0 || sx >= rw) continue;
        plane[y * width + x] = src[static_cast<size_t>((sy * rw + sx) * c + ch)];
      }
    }
  }
  return true;
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
  wo.class_names = listing.class_names;
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
        log << listing.files[file] << ": skipped: " << why[slot] << "\n";
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
