// inspect_data_file: DatasetFile does the validation; this file adds what a person
// checking a conversion wants to see (class balance, attributes, value range).
#include "data-tools/inspect_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "data-tools/cli_args.hpp"
#include "data/dataset_file.hpp"
#include "h5/h5.hpp"

namespace hpctrain {
namespace {

constexpr int64_t kPixelSamples = 16;     // samples whose min/max are shown
constexpr int64_t kLabelBlock = 1 << 20;  // labels read per HDF5 call
constexpr int64_t kValueBlock = 1 << 22;  // sample values read per HDF5 call, at most
constexpr hssize_t kMaxShownValues = 8;   // array attributes are abbreviated after this
constexpr size_t kMaxShownChars = 400;    // long string attributes are cut here

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// Attribute names of the root group, collected first so no C++ runs inside the C callback
// that could throw through HDF5.
std::vector<std::string> root_attribute_names(hid_t file) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) noexcept -> herr_t {
    try {
      static_cast<std::vector<std::string>*>(data)->emplace_back(name);
      return 0;
    } catch (...) {
      return -1;
    }
  };
  hsize_t index = 0;
  HT_CHECK_H5(H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names));
  return names;
}

// One attribute's value as text: strings, integers and floats, arrays abbreviated.
std::string attribute_value(hid_t file, const std::string& name, const std::string& path) {
  H5Handle attr(HT_CHECK_H5(H5Aopen(file, name.c_str(), H5P_DEFAULT)), H5Aclose);
  H5Handle type(HT_CHECK_H5(H5Aget_type(attr.get())), H5Tclose);
  H5Handle space(HT_CHECK_H5(H5Aget_space(attr.get())), H5Sclose);
  const H5T_class_t cls = HT_CHECK_H5(H5Tget_class(type.get()));
  const hssize_t n = HT_CHECK_H5(H5Sget_simple_extent_npoints(space.get()));
  const bool scalar = HT_CHECK_H5(H5Sget_simple_extent_ndims(space.get())) == 0;
  std::vector<std::string> values;
  if (cls == H5T_STRING) {
    values = h5_read_strings(attr.get(), path + ": attribute " + name);
    for (std::string& v : values) {
      if (v.size() > kMaxShownChars) v = v.substr(0, kMaxShownChars) + "...";
    }
  } else if (cls == H5T_INTEGER) {
    std::vector<int64_t> raw(static_cast<size_t>(n));
    HT_CHECK_H5(H5Aread(attr.get(), H5T_NATIVE_INT64, raw.data()));
    for (int64_t v : raw) values.push_back(std::to_string(v));
  } else if (cls == H5T_FLOAT) {
    std::vector<double> raw(static_cast<size_t>(n));
    HT_CHECK_H5(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, raw.data()));
    for (double v : raw) values.push_back(format_double(v));
  } else {
    // (Appending, rather than "(" + std::string, dodges a GCC 12 -Wrestrict false positive.)
    std::string text = "(";
    text += std::to_string(n) + " values of HDF5 class " + std::to_string(cls) + ")";
    return text;
  }
  if (scalar && values.size() == 1) return values[0];
  std::string text = "[";
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(kMaxShownValues); ++i) {
    text += (i > 0 ? ", " : "") + values[i];
  }
  if (values.size() > static_cast<size_t>(kMaxShownValues)) {
    text += ", ... (" + std::to_string(values.size()) + " values)";
  }
  return text + "]";
}

// Counts labels per class, reading /labels directly: DatasetFile::read_rows would also
// read every image, which for a large file is most of the I/O.
std::vector<int64_t> label_histogram(hid_t file, const DatasetShape& shape, int64_t* outside) {
  H5Handle labels(HT_CHECK_H5(H5Dopen2(file, "labels", H5P_DEFAULT)), H5Dclose);
  H5Handle file_space(HT_CHECK_H5(H5Dget_space(labels.get())), H5Sclose);
  std::vector<int64_t> counts(static_cast<size_t>(shape.num_classes), 0);
  std::vector<int32_t> block(static_cast<size_t>(std::min(shape.n, kLabelBlock)));
  *outside = 0;
  for (int64_t start = 0; start < shape.n; start += kLabelBlock) {
    const hsize_t offset[1] = {static_cast<hsize_t>(start)};
    const hsize_t count[1] = {static_cast<hsize_t>(std::min(kLabelBlock, shape.n - start))};
    HT_CHECK_H5(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset, nullptr, count, nullptr));
    H5Handle mem_space(HT_CHECK_H5(H5Screate_simple(1, count, nullptr)), H5Sclose);
    HT_CHECK_H5(H5Dread(labels.get(), H5T_NATIVE_INT32, mem_space.get(), file_space.get(),
                        H5P_DEFAULT, block.data()));
    for (hsize_t i = 0; i < count[0]; ++i) {
      if (block[i] >= 0 && block[i] < shape.num_classes) {
        ++counts[static_cast<size_t>(block[i])];
      } else {
        ++*outside;  // reported, not thrown: inspect is how one finds such a file
      }
    }
  }
  return counts;
}

// A block of sample values as floats: the stored type read raw (as the loader reads it) and
// widened, which keeps NaN and infinity. `offset` and `dims` select it in [N, C, H, W].
void read_values(hid_t images, const DatasetShape& shape, const hsize_t offset[4],
                 const hsize_t dims[4], std::vector<float>& values) {
  H5Handle file_space(HT_CHECK_H5(H5Dget_space(images)), H5Sclose);
  HT_CHECK_H5(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset, nullptr, dims, nullptr));
  H5Handle mem_space(HT_CHECK_H5(H5Screate_simple(4, dims, nullptr)), H5Sclose);
  const size_t elems = static_cast<size_t>(dims[0] * dims[1] * dims[2] * dims[3]);
  values.resize(elems);
  if (shape.type == SampleType::kU8) {
    std::vector<uint8_t> raw(elems);
    HT_CHECK_H5(H5Dread(images, H5T_NATIVE_UINT8, mem_space.get(), file_space.get(), H5P_DEFAULT,
                        raw.data()));
    std::copy(raw.begin(), raw.end(), values.begin());
  } else if (shape.type == SampleType::kF16) {
    std::vector<uint16_t> raw(elems);
    const H5Handle f16 = h5_float16_type();
    HT_CHECK_H5(
        H5Dread(images, f16.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, raw.data()));
    half_to_float_n(raw.data(), values.data(), elems);
  } else {
    HT_CHECK_H5(H5Dread(images, H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(), H5P_DEFAULT,
                        values.data()));
  }
}

// Calls fn(sample, values, n) for the values of samples [start, start + count) as floats, in
// order, read at most kValueBlock at a time (a sample larger than that in parts: a file's
// sample may hold 2^31 values), so memory stays bounded whatever the shape.
template <typename Fn>
void each_values(hid_t file, const DatasetShape& shape, int64_t start, int64_t count, Fn fn) {
  H5Handle images(HT_CHECK_H5(H5Dopen2(file, "images", H5P_DEFAULT)), H5Dclose);
  const auto c = static_cast<hsize_t>(shape.c), h = static_cast<hsize_t>(shape.h),
             w = static_cast<hsize_t>(shape.w);
  const auto block = static_cast<hsize_t>(kValueBlock);
  std::vector<float> values;
  const int64_t elems = shape.sample_elems();
  if (elems <= kValueBlock) {  // whole samples per read
    const int64_t per_read = kValueBlock / elems;
    for (int64_t s = start; s < start + count; s += per_read) {
      const int64_t n = std::min(per_read, start + count - s);
      const hsize_t offset[4] = {static_cast<hsize_t>(s), 0, 0, 0};
      const hsize_t dims[4] = {static_cast<hsize_t>(n), c, h, w};
      read_values(images.get(), shape, offset, dims, values);
      for (int64_t i = 0; i < n; ++i) {
        fn(s + i, values.data() + i * elems, static_cast<size_t>(elems));
      }
    }
    return;
  }
  // Rows of a channel per read, or parts of a row where one is longer than a block.
  const hsize_t rows = std::max<hsize_t>(1, block / w), cols = std::min(w, block);
  for (int64_t s = start; s < start + count; ++s) {
    for (hsize_t ch = 0; ch < c; ++ch) {
      for (hsize_t r = 0; r < h; r += rows) {
        for (hsize_t col = 0; col < w; col += cols) {
          const hsize_t offset[4] = {static_cast<hsize_t>(s), ch, r, col};
          const hsize_t dims[4] = {1, 1, std::min(rows, h - r), std::min(cols, w - col)};
          read_values(images.get(), shape, offset, dims, values);
          fn(s, values.data(), values.size());
        }
      }
    }
  }
}

// Min and max of the finite values of the first `samples` samples.
std::pair<float, float> pixel_range(hid_t file, const DatasetShape& shape, int64_t samples) {
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  each_values(file, shape, 0, samples, [&](int64_t, const float* v, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (std::isfinite(v[i])) {
        lo = std::min(lo, v[i]);
        hi = std::max(hi, v[i]);
      }
    }
  });
  return {lo, hi};
}

// The samples of a float16/float32 file that hold a value that is not finite, which
// training refuses when it reads them: their count, and the first one's row and value.
struct NonFinite {
  int64_t samples = 0, first_row = -1;
  const char* first = "";
};
NonFinite nonfinite_samples(hid_t file, const DatasetShape& shape) {
  NonFinite found;
  if (shape.type == SampleType::kU8) return found;
  int64_t counted = -1;  // the last sample counted (a sample read in parts counts once)
  each_values(file, shape, 0, shape.n, [&](int64_t sample, const float* v, size_t n) {
    if (sample == counted) return;
    const auto [bad, what] = first_nonfinite(v, SampleType::kF32, 1, static_cast<int64_t>(n));
    if (bad < 0) return;
    counted = sample;
    if (found.samples++ == 0) {
      found.first_row = sample;
      found.first = what;
    }
  });
  return found;
}

// The class histogram's rows: id, name where the file has them, count and share.
void print_classes(const DatasetShape& shape, const std::vector<int64_t>& counts, int64_t outside,
                   std::ostream& out) {
  out << "classes:\n";
  char line[64];
  for (int k = 0; k < shape.num_classes; ++k) {
    const std::string name = k < static_cast<int>(shape.class_names.size())
                                 ? shape.class_names[static_cast<size_t>(k)]
                                 : std::string("-");
    // The name unbounded (a folder name may be long), the figures formatted after it.
    std::snprintf(line, sizeof(line), "  %4d  ", k);
    out << line << name << std::string(name.size() < 20 ? 20 - name.size() : 0, ' ');
    std::snprintf(
        line, sizeof(line), " %10lld  %6.2f%%\n",
        static_cast<long long>(counts[static_cast<size_t>(k)]),
        100.0 * static_cast<double>(counts[static_cast<size_t>(k)]) / static_cast<double>(shape.n));
    out << line;
  }
  if (outside > 0) {
    out << "  labels outside [0, " << shape.num_classes << "): " << outside << "\n";
  }
}

// What a scan of every token id found.
struct TokenScan {
  std::vector<int32_t> first_row;  // row 0, all its columns
  int64_t ids_used = 0;            // distinct ids in [0, vocab_size)
  int64_t outside = 0;             // ids outside [0, vocab_size)
  int64_t bad_row = -1, bad_column = -1;
  int32_t bad_id = 0;  // the first id outside, at (bad_row, bad_column)
};

// Reads /tokens whole, a block of rows per HDF5 call, and checks every id: the loader
// checks only the rows a batch reads, so a damaged row would stop training when reached.
TokenScan scan_tokens(hid_t file, const DatasetShape& shape) {
  H5Handle tokens(HT_CHECK_H5(H5Dopen2(file, "tokens", H5P_DEFAULT)), H5Dclose);
  H5Handle file_space(HT_CHECK_H5(H5Dget_space(tokens.get())), H5Sclose);
  hsize_t dims[2] = {0, 0};
  HT_CHECK_H5(H5Sget_simple_extent_dims(file_space.get(), dims, nullptr));
  const auto cols = static_cast<int64_t>(dims[1]);
  const int64_t rows_per_block = std::max<int64_t>(1, kLabelBlock / cols);
  std::vector<int32_t> block(static_cast<size_t>(std::min(shape.n, rows_per_block) * cols));
  std::vector<bool> used(static_cast<size_t>(shape.vocab_size), false);
  TokenScan scan;
  for (int64_t start = 0; start < shape.n; start += rows_per_block) {
    const int64_t rows = std::min(rows_per_block, shape.n - start);
    const hsize_t offset[2] = {static_cast<hsize_t>(start), 0};
    const hsize_t count[2] = {static_cast<hsize_t>(rows), dims[1]};
    HT_CHECK_H5(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset, nullptr, count, nullptr));
    H5Handle mem_space(HT_CHECK_H5(H5Screate_simple(2, count, nullptr)), H5Sclose);
    HT_CHECK_H5(H5Dread(tokens.get(), H5T_NATIVE_INT32, mem_space.get(), file_space.get(),
                        H5P_DEFAULT, block.data()));
    if (start == 0) scan.first_row.assign(block.begin(), block.begin() + cols);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const int32_t id = block[static_cast<size_t>(i)];
      if (id >= 0 && id < shape.vocab_size) {
        if (!used[static_cast<size_t>(id)]) ++scan.ids_used;
        used[static_cast<size_t>(id)] = true;
      } else if (scan.outside++ == 0) {
        scan.bad_row = start + i / cols;
        scan.bad_column = i % cols;
        scan.bad_id = id;
      }
    }
  }
  return scan;
}

// A token file: shape, vocabulary, every id checked, the class histogram of a
// classification file and the first sample as text. Ids outside the vocabulary are
// reported, not thrown: inspect is how one finds such a file.
void describe_tokens(const std::string& path, const DatasetShape& shape, std::ostream& out) {
  const H5Handle file = h5_open_read_only(path);
  const bool next = shape.labels_per_sample > 1;
  out << "file: " << path << "\n";
  out << "samples: " << shape.n << "\n";
  out << "tokens: [" << shape.n << ", " << shape.w + (next ? 1 : 0) << "] ("
      << (next ? "N, T + 1: next-token windows" : "N, T: sequences with a label")
      << "), T = " << shape.w << "\n";
  out << "vocab_size: " << shape.vocab_size << (shape.level.empty() ? "" : ", level " + shape.level)
      << "\n";
  const TokenScan scan = scan_tokens(file.get(), shape);
  out << "token ids: " << scan.ids_used << " of " << shape.vocab_size << " used";
  if (scan.outside == 0) {
    out << ", none outside [0, " << shape.vocab_size << ")\n";
  } else {
    out << "; outside [0, " << shape.vocab_size << "): " << scan.outside << " (the first, "
        << scan.bad_id << ", at row " << scan.bad_row << ", column " << scan.bad_column
        << "); training stops with exit 2 when it reads that row\n";
  }
  std::string text;
  for (int32_t id : scan.first_row) {
    if (text.size() > 200) break;
    const bool known = id >= 0 && id < shape.vocab_size;
    if (shape.vocabulary.empty() || !known) {
      if (!text.empty()) text += ' ';
      text += known ? std::to_string(id) : "<" + std::to_string(id) + "?>";
    } else {
      if (shape.level == "word" && !text.empty()) text += ' ';
      text += shape.vocabulary[static_cast<size_t>(id)];
    }
  }
  out << "sample 0: " << text << (text.size() > 200 ? " ..." : "") << "\n";
  if (next) return;
  out << "num_classes: " << shape.num_classes << "\n";
  int64_t outside = 0;
  print_classes(shape, label_histogram(file.get(), shape, &outside), outside, out);
}

// An image file: shape, class histogram, root attributes and the range of the values.
void describe_images(const std::string& path, const DatasetShape& shape, std::ostream& out) {
  const H5Handle file = h5_open_read_only(path);
  out << "file: " << path << "\n";
  out << "samples: " << shape.n << "\n";
  out << "images: [" << shape.n << ", " << shape.c << ", " << shape.h << ", " << shape.w
      << "] (N, C, H, W) " << to_string(shape.type) << ", C=" << shape.c << " H=" << shape.h
      << " W=" << shape.w << ", " << shape.sample_bytes() << " bytes per sample\n";
  out << "num_classes: " << shape.num_classes << "\n";

  // 1. Class histogram, with names where the file has them.
  int64_t outside = 0;
  const std::vector<int64_t> counts = label_histogram(file.get(), shape, &outside);
  print_classes(shape, counts, outside, out);

  // 2. Root attributes (class_names was shown with the histogram).
  out << "attributes:\n";
  for (const std::string& name : root_attribute_names(file.get())) {
    if (name == "class_names") continue;
    out << "  " << name << ": " << attribute_value(file.get(), name, path) << "\n";
  }

  // 3. Value range: catches a float file that was never normalised, or an all-zero one.
  const int64_t samples = std::min(shape.n, kPixelSamples);
  const auto [lo, hi] = pixel_range(file.get(), shape, samples);
  out << "pixel range (first " << samples << " samples, finite values): ";
  if (lo <= hi) {
    out << "min " << format_double(lo) << ", max " << format_double(hi) << "\n";
  } else {
    out << "none finite\n";
  }
  // 4. Every sample's values (reported, not thrown: inspect is how one finds such a file).
  const NonFinite bad = nonfinite_samples(file.get(), shape);
  if (bad.samples > 0) {
    out << "samples holding a value that is not finite (training refuses them): " << bad.samples
        << ", the first at row " << bad.first_row << " (" << bad.first << ")\n";
  }
}

}  // namespace

void inspect_data_file(const std::string& path, std::ostream& out) {
  const DatasetFile data(path);  // validates, with the loader's error messages
  const DatasetShape& shape = data.shape();
  // Reading every label, id and value may meet damaged chunks that opening did not.
  h5_reading(path, [&] {
    if (shape.tokens()) {
      describe_tokens(path, shape, out);
    } else {
      describe_images(path, shape, out);
    }
  });
}

double inspect_timeout(const std::string& value) {
  const std::optional<double> seconds = cli::parse_number(value);
  if (!seconds || !(*seconds >= 0.0) || *seconds > 1e9) {
    throw UsageError("inspect: --timeout: expected seconds from 0 to 1e9 (0: no limit), got '" +
                     value + "'");
  }
  return *seconds;
}

std::string inspect_timeout_message(const std::string& path, double seconds) {
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%g", seconds);
  return "inspect: " + path + ": no answer after " + limit +
         " s (HDF5 loops on some damaged files, and a stalled file system blocks as long); "
         "--timeout SECONDS changes the limit";
}

}  // namespace hpctrain
