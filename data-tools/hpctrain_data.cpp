// hpctrain-data: converts data sets into the project's HDF5 format (docs/formats.md,
// "Data files"), derives and describes such files. Subcommands: fashion-mnist, idx, images,
// synth, split, shard, text, inspect; the work is done in the converters beside this file, this
// is argument handling.
// Exit codes follow core/error.hpp: 2 for bad usage or input, 1 for other failures.
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/crash_note.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "core/version.hpp"
#include "data-tools/cli_args.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/file_commands.hpp"
#include "data-tools/idx.hpp"
#include "data-tools/image_folder.hpp"
#include "data-tools/row_copy.hpp"
#include "data-tools/sample_codec.hpp"
#include "data-tools/synth.hpp"
#include "data-tools/text_tokens.hpp"
#include "h5/h5.hpp"

namespace {

using hpctrain::UsageError;
using hpctrain::cli::Args;
using hpctrain::cli::int_option;
using hpctrain::cli::option_or;
using hpctrain::cli::parse_args;
using hpctrain::cli::positionals;
using hpctrain::cli::require;

constexpr const char* kUsage =
    "usage: hpctrain-data COMMAND [OPTIONS]\n"
    "\n"
    "Converts data sets into hpctrain's HDF5 format (/images [N,C,H,W], /labels [N]).\n"
    "\n"
    "commands:\n"
    "  fashion-mnist --out DIR     Fashion-MNIST IDX files -> DIR/{train,val,test}.h5\n"
    "  idx --images F --labels F --out FILE   any MNIST-format (IDX) pair -> FILE\n"
    "  images DIR --out FILE --size WxH       image folder (a sub-folder per class) -> FILE\n"
    "  synth --out FILE --n N --shape CxHxW --classes K   synthetic learnable images\n"
    "  split FILE --ratios 85,2,13 --out-prefix P   stratified P-train/val/test.h5\n"
    "  shard FILE --parts N --out-prefix P  contiguous P-00000-of-0000N.h5 ...\n"
    "  stats FILES... [--dry-run]  per-channel mean and std, stored for data.normalize: auto\n"
    "  text FILES... --out OUT --seq-len T   text -> token windows (/tokens [N, T+1])\n"
    "  inspect FILE.h5             describe a data file\n"
    "\n"
    "Run 'hpctrain-data COMMAND --help' for a command's options; --version prints the\n"
    "version and git commit.\n";

constexpr const char* kFashionUsage =
    "usage: hpctrain-data fashion-mnist --out DIR [--src DIR] [--val N] [--seed S] [--deflate L]\n"
    "\n"
    "Converts Fashion-MNIST (Debian package dataset-fashion-mnist) into\n"
    "  DIR/train.h5  the 60000 training images less the validation rows\n"
    "  DIR/val.h5    N rows drawn from the training set by a permutation seeded with S\n"
    "                (not written when N is 0; an old DIR/val.h5 is then removed)\n"
    "  DIR/test.h5   the 10000 test images\n"
    "stored as uint8 [N, 1, 28, 28] with the 10 class names. Rows keep their original order\n"
    "within each file.\n"
    "\n"
    "options:\n"
    "  --out DIR      output directory (created if missing)\n"
    "  --src DIR      directory of the IDX files, *.gz or plain\n"
    "                 (default /usr/share/datasets/fashion-mnist)\n"
    "  --val N        validation rows carved from the training set (default 5000)\n"
    "  --seed S       seed of the validation split (default 1)\n"
    "  --deflate L    deflate compression level 0-9 (default 0: uncompressed)\n";

constexpr const char* kIdxUsage =
    "usage: hpctrain-data idx --images FILE --labels FILE --out FILE.h5 [--classes N]\n"
    "                         [--deflate L]\n"
    "\n"
    "Converts an IDX (MNIST-format) image file [N, H, W] and label file [N], gzip-compressed\n"
    "or plain, into FILE.h5 as uint8 [N, 1, H, W].\n"
    "\n"
    "options:\n"
    "  --images FILE  IDX image file\n"
    "  --labels FILE  IDX label file with as many items\n"
    "  --out FILE     data file to write\n"
    "  --classes N    number of classes; every label must be below it\n"
    "                 (default: largest label + 1)\n"
    "  --deflate L    deflate compression level 0-9 (default 0: uncompressed)\n";

constexpr const char* kImagesUsage =
    "usage: hpctrain-data images DIR --out FILE.h5 --size WxH [--gray|--rgb]\n"
    "                            [--resize stretch|crop|pad] [--dtype uint8|float16|float32]\n"
    "                            [--seed S] [--threads T] [--deflate L]\n"
    "\n"
    "Converts an image folder, DIR/CLASS/.../IMAGE, into FILE.h5 as [N, C, H, W]. Classes are\n"
    "the sub-folders of DIR in sorted (byte) order, stored as the class_names attribute;\n"
    "each class folder is searched recursively. Hidden files and folders (names starting\n"
    "with '.') are ignored. Images are decoded with stb_image (PNG, JPEG, BMP, GIF, TGA,\n"
    "PSD, HDR, PIC, 8-bit binary PNM; alpha is dropped), converted to grey (ITU-R 601 luma)\n"
    "or kept RGB, and resized to WxH (stb_image_resize; any input sizes). A file that is\n"
    "not a readable image is reported on stderr and skipped; the summary counts them.\n"
    "Rows are in sorted order (class, then file path) unless --seed shuffles them.\n"
    "\n"
    "options:\n"
    "  --out FILE     data file to write\n"
    "  --size WxH     sample width and height in pixels, e.g. 197x148\n"
    "  --gray         one channel, ITU-R 601 luma (default)\n"
    "  --rgb          three channels\n"
    "  --resize M     an image of another aspect ratio: stretch (default) scales each side\n"
    "                 to WxH; crop keeps the aspect ratio, covers WxH and keeps the middle;\n"
    "                 pad keeps the aspect ratio, fits inside WxH and fills with zeros\n"
    "  --dtype T      uint8 (default; 0-255), float16 or float32 (value / 255, in [0, 1])\n"
    "  --seed S       store the rows in a random order seeded with S (default: sorted)\n"
    "  --threads T    decoding threads (default: up to 8; the output does not depend on it)\n"
    "  --deflate L    deflate compression level 0-9 (default 0: uncompressed)\n";

constexpr const char* kSynthUsage =
    "usage: hpctrain-data synth --out FILE.h5 --n N --shape CxHxW --classes K\n"
    "                           [--dtype uint8|float16|float32] [--seed S] [--threads T]\n"
    "                           [--deflate L]\n"
    "\n"
    "Writes N synthetic images that a network can learn: each class has a random smooth\n"
    "template (an 8x8 grid per channel, upsampled); a sample is its class's template,\n"
    "shifted by up to 1/16 of the size, plus noise. Sample i has label i % K. The same\n"
    "options give the same file. Example, the shape of the classic benchmark:\n"
    "  hpctrain-data synth --out synth.h5 --n 9000 --shape 1x148x197 --classes 9\n"
    "\n"
    "options:\n"
    "  --out FILE     data file to write\n"
    "  --n N          number of samples\n"
    "  --shape CxHxW  sample shape, e.g. 1x148x197\n"
    "  --classes K    number of classes (at least 2)\n"
    "  --dtype T      float16 (default), uint8 or float32\n"
    "  --seed S       seed of the templates and samples (default 1)\n"
    "  --threads T    generating threads (default: up to 8; the output does not depend on it)\n"
    "  --deflate L    deflate compression level 0-9 (default 0: uncompressed)\n";

constexpr const char* kTextUsage =
    "usage: hpctrain-data text FILES... --out OUT --seq-len T [--level char|word]\n"
    "                          [--vocab-size V] [--val-fraction F --test-fraction F]\n"
    "\n"
    "Reads the UTF-8 text files in the order given, splits them into tokens and writes\n"
    "windows of T + 1 tokens (/tokens [N, T + 1], int32; window i starts at token i T, so\n"
    "windows overlap by one token) with the vocabulary as attributes: a language model\n"
    "reads tokens 0..T-1 and predicts 1..T. The same options give the same files.\n"
    "\n"
    "options:\n"
    "  --out OUT          the file to write; with a fraction, the directory for\n"
    "                     OUT/train.h5 and val.h5, test.h5 (those with a fraction above\n"
    "                     0), which share the vocabulary; an earlier split's file that\n"
    "                     this one does not write is removed, another file kept\n"
    "  --seq-len T        steps per window (at least 2)\n"
    "  --level L          char (default): UTF-8 characters; word: runs of letters, digits,\n"
    "                     apostrophes and non-ASCII characters, each other ASCII\n"
    "                     character on its own, newlines kept, other white space\n"
    "                     separating\n"
    "  --vocab-size V     <unk> (id 0) for the tokens outside the V - 1 most frequent\n"
    "                     (default: every token, no <unk>)\n"
    "  --val-fraction F   the share of windows for val.h5, --test-fraction for test.h5;\n"
    "                     window i goes to test when frac(0.618.. i) < the test fraction,\n"
    "                     to val below the sum of both: spread over the whole text\n";

const std::vector<std::string> kFashionClasses = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                  "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                  "Bag",         "Ankle boot"};

// The .gz file if present, else the uncompressed one (users often gunzip these).
std::string idx_file(const std::string& dir, const std::string& stem) {
  const std::string gz = (std::filesystem::path(dir) / (stem + ".gz")).string();
  const std::string plain = (std::filesystem::path(dir) / stem).string();
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz;
  if (std::filesystem::exists(plain, ec)) return plain;
  throw UsageError(gz + ": no such file (install Debian's dataset-fashion-mnist or pass --src)");
}

void make_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw UsageError(dir + ": cannot create output directory" +
                     (ec ? ": " + ec.message() : std::string()));
  }
}

hpctrain::DatasetWriterOptions writer_options(const hpctrain::IdxPair& pair,
                                              std::vector<std::string> class_names,
                                              std::string source, int deflate) {
  hpctrain::DatasetWriterOptions o;
  o.type = hpctrain::SampleType::kU8;
  o.c = 1;
  o.h = pair.images.dims()[1];
  o.w = pair.images.dims()[2];
  o.num_classes = pair.num_classes;
  o.class_names = std::move(class_names);
  o.source = std::move(source);
  o.deflate_level = deflate;
  return o;
}

void print_written(const hpctrain::DatasetWriter& w, const hpctrain::DatasetWriterOptions& o,
                   double seconds) {
  std::printf("wrote %s: %lld samples [%lld, %lld, %lld] uint8, %d classes (%.2f s)\n",
              w.path().c_str(), static_cast<long long>(w.rows()), static_cast<long long>(o.c),
              static_cast<long long>(o.h), static_cast<long long>(o.w), o.num_classes, seconds);
}

int cmd_fashion_mnist(const std::vector<std::string>& argv) {
  const std::string cmd = "fashion-mnist";
  const Args args = parse_args(cmd, argv, {"out", "src", "val", "seed", "deflate"});
  if (args.help) {
    std::cout << kFashionUsage;
    return 0;
  }
  if (!args.positional.empty()) {
    throw UsageError(cmd + ": unexpected argument '" + args.positional[0] +
                     "' (see hpctrain-data fashion-mnist --help)");
  }
  const std::string out = require(args, cmd, "out");
  const auto it = args.options.find("src");
  const std::string src =
      it != args.options.end() ? it->second : "/usr/share/datasets/fashion-mnist";
  const int64_t val = int_option(args, "val", 5000, 0, INT64_MAX);
  const auto seed = static_cast<uint64_t>(int_option(args, "seed", 1, 0, INT64_MAX));
  const int deflate = static_cast<int>(int_option(args, "deflate", 0, 0, 9));

  // 1. Check both inputs before writing anything.
  // (Paths first, in order, so a missing file is reported the same way every time.)
  const std::string train_images = idx_file(src, "train-images-idx3-ubyte");
  const std::string train_labels = idx_file(src, "train-labels-idx1-ubyte");
  const std::string test_images = idx_file(src, "t10k-images-idx3-ubyte");
  const std::string test_labels = idx_file(src, "t10k-labels-idx1-ubyte");
  hpctrain::IdxPair train = hpctrain::open_idx_pair(train_images, train_labels, 10);
  hpctrain::IdxPair test = hpctrain::open_idx_pair(test_images, test_labels, 10);
  if (val >= train.images.items()) {
    throw UsageError("--val: " + std::to_string(val) + " validation rows would leave no " +
                     "training rows (the training set has " + std::to_string(train.images.items()) +
                     ")");
  }
  make_output_dir(out);
  // Each output checked before any is written (a directory named test.h5 was found after
  // train.h5 and val.h5 had replaced the earlier ones).
  for (const char* name : {"train.h5", "val.h5", "test.h5"}) {
    if (val > 0 || std::string(name) != "val.h5") {
      hpctrain::check_output_file((std::filesystem::path(out) / name).string());
    }
  }
  // The source attribute says what the rows are and how to reproduce the split.
  const std::string origin =
      "Fashion-MNIST (Zalando Research), converted by hpctrain-data from " + src + ": ";
  const std::string split = " of train-*-ubyte (validation split: " + std::to_string(val) +
                            " rows, seed " + std::to_string(seed) + ")";

  // 2. Train and val in one pass over the training IDX files.
  {
    const double t0 = hpctrain::now_seconds();
    const auto train_opts =
        writer_options(train, kFashionClasses, origin + "training rows" + split, deflate);
    const auto val_opts =
        writer_options(train, kFashionClasses, origin + "validation rows" + split, deflate);
    hpctrain::DatasetWriter train_writer((std::filesystem::path(out) / "train.h5").string(),
                                         train_opts);
    if (val > 0) {
      hpctrain::DatasetWriter val_writer((std::filesystem::path(out) / "val.h5").string(),
                                         val_opts);
      hpctrain::write_idx_rows(train, hpctrain::validation_rows(train.images.items(), val, seed),
                               {&train_writer, &val_writer});
      hpctrain::commit_together({&train_writer, &val_writer});  // never a mix of two seeds
      const double seconds = hpctrain::now_seconds() - t0;
      print_written(train_writer, train_opts, seconds);
      print_written(val_writer, val_opts, seconds);
    } else {
      hpctrain::write_idx_rows(train, {}, {&train_writer});
      train_writer.finish();
      // A val.h5 from an earlier run would overlap this train.h5: removed before it is in
      // place.
      const std::filesystem::path stale = std::filesystem::path(out) / "val.h5";
      std::error_code ec;
      if (std::filesystem::remove(stale, ec)) {
        std::printf("removed %s (it overlaps the new training set)\n", stale.c_str());
      }
      train_writer.close();
      print_written(train_writer, train_opts, hpctrain::now_seconds() - t0);
    }
  }

  // 3. Test.
  {
    const double t0 = hpctrain::now_seconds();
    const auto opts =
        writer_options(test, kFashionClasses, origin + "t10k-*-ubyte, the test set", deflate);
    hpctrain::DatasetWriter writer((std::filesystem::path(out) / "test.h5").string(), opts);
    hpctrain::write_idx_rows(test, {}, {&writer});
    writer.close();
    print_written(writer, opts, hpctrain::now_seconds() - t0);
  }
  return 0;
}

int cmd_idx(const std::vector<std::string>& argv) {
  const std::string cmd = "idx";
  const Args args = parse_args(cmd, argv, {"images", "labels", "out", "classes", "deflate"});
  if (args.help) {
    std::cout << kIdxUsage;
    return 0;
  }
  if (!args.positional.empty()) {
    throw UsageError(cmd + ": unexpected argument '" + args.positional[0] +
                     "' (see hpctrain-data idx --help)");
  }
  const std::string images = require(args, cmd, "images");
  const std::string labels = require(args, cmd, "labels");
  const std::string out = require(args, cmd, "out");
  const int classes = static_cast<int>(int_option(args, "classes", 0, 1, hpctrain::kMaxClasses));
  const int deflate = static_cast<int>(int_option(args, "deflate", 0, 0, 9));

  hpctrain::check_outputs_differ(images, {out});
  hpctrain::check_outputs_differ(labels, {out});
  const double t0 = hpctrain::now_seconds();
  hpctrain::IdxPair pair = hpctrain::open_idx_pair(images, labels, classes);
  const auto opts = writer_options(
      pair, {}, "converted by hpctrain-data from IDX files " + images + " and " + labels, deflate);
  hpctrain::DatasetWriter writer(out, opts);
  hpctrain::write_idx_rows(pair, {}, {&writer});
  writer.close();
  print_written(writer, opts, hpctrain::now_seconds() - t0);
  return 0;
}

// Worker threads when --threads is not given: the cores, at most 8, so a tool run on a
// shared login node does not take all of it.
int64_t default_threads() {
  return std::min<int64_t>(8, std::max(1u, std::thread::hardware_concurrency()));
}

int cmd_images(std::vector<std::string> argv) {
  const std::string cmd = "images";
  // --gray/--rgb are flags: turn them into options parse_args knows (not a word that is an
  // option's value: --out --rgb names the output "--rgb").
  int flags = 0;
  bool value_next = false;
  for (std::string& a : argv) {
    if (std::exchange(value_next, false)) continue;
    if (a == "--color" || a.rfind("--color=", 0) == 0) {  // the flags' inner spelling only
      throw UsageError(cmd + ": unknown option '--color' (give --gray or --rgb)");
    }
    if (a == "--gray" || a == "--rgb") {
      if (++flags > 1) {
        throw UsageError(cmd + ": give one of --gray and --rgb (see hpctrain-data images --help)");
      }
      a = "--color=" + a.substr(2);
      continue;
    }
    value_next = a.rfind("--", 0) == 0 && a.find('=') == std::string::npos && a != "--help";
  }
  const Args args = parse_args(
      cmd, argv, {"out", "size", "color", "resize", "dtype", "seed", "threads", "deflate"});
  if (args.help) {
    std::cout << kImagesUsage;
    return 0;
  }
  const std::string dir = positionals(args, cmd, 1, "one image folder DIR")[0];
  const std::string out = require(args, cmd, "out");
  hpctrain::ImageFolderOptions o;
  const std::vector<int64_t> size =
      hpctrain::parse_x_dims(require(args, cmd, "size"), 2, "--size", "WxH");
  o.width = size[0];
  o.height = size[1];
  o.color = option_or(args, "color", "gray") == "rgb" ? hpctrain::ColorMode::kRgb
                                                      : hpctrain::ColorMode::kGray;
  const std::string resize = option_or(args, "resize", "stretch");
  if (resize != "stretch" && resize != "crop" && resize != "pad") {
    throw UsageError("--resize: expected stretch, crop or pad, got '" + resize + "'");
  }
  o.resize = resize == "crop"  ? hpctrain::ResizeMode::kCrop
             : resize == "pad" ? hpctrain::ResizeMode::kPad
                               : hpctrain::ResizeMode::kStretch;
  o.type = hpctrain::parse_sample_type(option_or(args, "dtype", "uint8"), "--dtype");
  o.shuffle = args.options.count("seed") > 0;
  o.seed = static_cast<uint64_t>(int_option(args, "seed", 0, 0, INT64_MAX));
  o.threads = static_cast<int>(int_option(args, "threads", default_threads(), 1, 256));
  o.deflate_level = static_cast<int>(int_option(args, "deflate", 0, 0, 9));

  const double t0 = hpctrain::now_seconds();
  const hpctrain::ImageFolderReport r = hpctrain::convert_image_folder(dir, out, o, std::cerr);
  if (r.skipped > 0) {
    std::cerr << "skipped " << r.skipped << " of " << r.files << " files\n";
  }
  std::printf(
      "wrote %s: %lld samples [%lld, %lld, %lld] %s, %zu classes, %lld of %lld files "
      "(%.2f s)\n",
      out.c_str(), static_cast<long long>(r.rows()),
      static_cast<long long>(o.color == hpctrain::ColorMode::kRgb ? 3 : 1),
      static_cast<long long>(o.height), static_cast<long long>(o.width),
      hpctrain::to_string(o.type), r.class_names.size(), static_cast<long long>(r.rows()),
      static_cast<long long>(r.files), hpctrain::now_seconds() - t0);
  return 0;
}

int cmd_synth(const std::vector<std::string>& argv) {
  const std::string cmd = "synth";
  const Args args = parse_args(
      cmd, argv, {"out", "n", "shape", "classes", "dtype", "seed", "threads", "deflate"});
  if (args.help) {
    std::cout << kSynthUsage;
    return 0;
  }
  positionals(args, cmd, 0, "no positional arguments");
  hpctrain::SynthOptions o;
  const std::string out = require(args, cmd, "out");
  o.n = int_option(args, "n", 0, 1, INT64_C(1) << 40);
  if (o.n == 0) require(args, cmd, "n");
  const std::vector<int64_t> shape =
      hpctrain::parse_x_dims(require(args, cmd, "shape"), 3, "--shape", "CxHxW");
  o.c = shape[0];
  o.h = shape[1];
  o.w = shape[2];
  o.classes = static_cast<int>(int_option(args, "classes", 0, 2, hpctrain::kMaxClasses));
  if (o.classes == 0) require(args, cmd, "classes");
  o.type = hpctrain::parse_sample_type(option_or(args, "dtype", "float16"), "--dtype");
  o.seed = static_cast<uint64_t>(int_option(args, "seed", 1, 0, INT64_MAX));
  o.threads = static_cast<int>(int_option(args, "threads", default_threads(), 1, 256));
  o.deflate_level = static_cast<int>(int_option(args, "deflate", 0, 0, 9));

  const double t0 = hpctrain::now_seconds();
  hpctrain::synth_data_file(out, o);
  std::printf("wrote %s: %lld samples [%lld, %lld, %lld] %s, %d classes (%.2f s)\n", out.c_str(),
              static_cast<long long>(o.n), static_cast<long long>(o.c), static_cast<long long>(o.h),
              static_cast<long long>(o.w), hpctrain::to_string(o.type), o.classes,
              hpctrain::now_seconds() - t0);
  return 0;
}

// A fraction in [0, 1) for --NAME; anything else names the option.
double fraction_option(const Args& args, const std::string& name) {
  const std::string text = option_or(args, name, "0");
  const std::optional<double> v = hpctrain::cli::parse_number(text);
  if (!v || !(*v >= 0 && *v < 1)) {
    throw UsageError("text: --" + name + ": expected a number in [0, 1), got '" + text + "'");
  }
  return *v;
}

int cmd_text(const std::vector<std::string>& argv) {
  const Args args = parse_args(
      "text", argv, {"out", "seq-len", "level", "vocab-size", "val-fraction", "test-fraction"});
  if (args.help) {
    std::cout << kTextUsage;
    return 0;
  }
  hpctrain::TextOptions o;
  o.files = args.positional;
  if (o.files.empty())
    throw UsageError("text: expected text FILES (see hpctrain-data text --help)");
  o.out = require(args, "text", "out");
  // At least 2: a window of one token and its next reads as a classification file.
  o.seq_len = int_option(args, "seq-len", 0, 2, 1 << 20);
  if (o.seq_len == 0) require(args, "text", "seq-len");
  o.level = option_or(args, "level", "char");
  o.vocab_size = int_option(args, "vocab-size", 0, 2, 1 << 24);
  o.val_fraction = fraction_option(args, "val-fraction");
  o.test_fraction = fraction_option(args, "test-fraction");
  const hpctrain::TextReport r = hpctrain::convert_text(o);
  std::cout << "text: " << o.files.size() << " file(s), " << r.tokens << " " << o.level
            << " tokens, vocabulary " << r.vocab << ", windows of " << o.seq_len + 1 << "\n";
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    std::cout << "wrote " << r.outputs[i] << ": " << r.windows[i] << " windows\n";
  }
  for (const std::string& path : r.kept) {
    std::cout << "kept " << path
              << ": not written by hpctrain-data text (this split writes no file of that name)\n";
  }
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return hpctrain::kExitUsage;
  }
  const std::string command = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "hpctrain-data " << hpctrain::version() << " (commit " << hpctrain::git_commit()
              << ")\n";
    return 0;
  }
  if (command == "fashion-mnist") return cmd_fashion_mnist(rest);
  if (command == "idx") return cmd_idx(rest);
  if (command == "images") return cmd_images(rest);
  if (command == "synth") return cmd_synth(rest);
  if (command == "split") return hpctrain::data_cli::cmd_split(rest);
  if (command == "shard") return hpctrain::data_cli::cmd_shard(rest);
  if (command == "stats") return hpctrain::data_cli::cmd_stats(rest);
  if (command == "text") return cmd_text(rest);
  if (command == "inspect") return hpctrain::data_cli::cmd_inspect(rest);
  throw UsageError("unknown command '" + command + "' (see hpctrain-data --help)");
}

}  // namespace

int main(int argc, char** argv) {
  hpctrain::h5_no_cleanup_at_exit();
  hpctrain::install_crash_notes();
  // A closed stdout (a log pipe whose reader died, `| head`) fails the writes to it instead
  // of killing the process with SIGPIPE, half-way into a checkpoint or an output file.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const hpctrain::UsageError& e) {
    std::cerr << hpctrain::one_line(e.what()) << "\n";
    hpctrain::exit_after_error(hpctrain::kExitUsage);
  } catch (const std::exception& e) {
    std::cerr << hpctrain::one_line(e.what()) << "\n";
    hpctrain::exit_after_error(hpctrain::kExitFailure);
  }
}
