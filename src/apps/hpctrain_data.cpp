// hpctrain-data: converts data sets into the project's HDF5 format (DESIGN.md, "Data
// files") and describes such files. Subcommands: fashion-mnist, idx, inspect.
// Exit codes follow core/error.hpp: 2 for bad usage or input, 1 for other failures.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/dataset_writer.hpp"
#include "data/idx.hpp"
#include "data/inspect_data.hpp"

namespace {

using hpctrain::UsageError;

constexpr const char* kUsage =
    "usage: hpctrain-data COMMAND [OPTIONS]\n"
    "\n"
    "Converts data sets into hpctrain's HDF5 format (/images [N,C,H,W], /labels [N]).\n"
    "\n"
    "commands:\n"
    "  fashion-mnist --out DIR     Fashion-MNIST IDX files -> DIR/{train,val,test}.h5\n"
    "  idx --images F --labels F --out FILE   any MNIST-format (IDX) pair -> FILE\n"
    "  inspect FILE.h5             describe a data file\n"
    "\n"
    "Run 'hpctrain-data COMMAND --help' for a command's options.\n";

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

constexpr const char* kInspectUsage =
    "usage: hpctrain-data inspect FILE.h5\n"
    "\n"
    "Validates a data file and prints its shape, type, classes with a label histogram,\n"
    "attributes and the pixel range of the first samples.\n";

const std::vector<std::string> kFashionClasses = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                  "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                  "Bag",         "Ankle boot"};

// Parsed "--name value" / "--name=value" options of one subcommand, plus positionals.
struct Args {
  std::map<std::string, std::string> options;
  std::vector<std::string> positional;
  bool help = false;
};

Args parse_args(const std::string& command, const std::vector<std::string>& argv,
                const std::vector<std::string>& known) {
  const std::string hint = " (see hpctrain-data " + command + " --help)";
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      args.help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      args.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    bool is_known = false;
    for (const std::string& k : known) is_known = is_known || k == name;
    if (!is_known) throw UsageError(command + ": unknown option '--" + name + "'" + hint);
    if (!has_value) {
      if (i + 1 >= argv.size()) throw UsageError(command + ": --" + name + " needs a value" + hint);
      value = argv[++i];
    }
    args.options[name] = value;
  }
  return args;
}

std::string require(const Args& args, const std::string& command, const std::string& name) {
  const auto it = args.options.find(name);
  if (it == args.options.end() || it->second.empty()) {
    throw UsageError(command + ": --" + name + " is required (see hpctrain-data " + command +
                     " --help)");
  }
  return it->second;
}

// A whole decimal integer in [lo, hi]; anything else names the option.
int64_t int_option(const Args& args, const std::string& name, int64_t fallback, int64_t lo,
                   int64_t hi) {
  const auto it = args.options.find(name);
  if (it == args.options.end()) return fallback;
  const std::string& text = it->second;
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || value < lo || value > hi) {
    const std::string expected =
        hi == INT64_MAX && lo == 0
            ? "a non-negative integer"
            : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    throw UsageError("--" + name + ": expected " + expected + ", got '" + text + "'");
  }
  return value;
}

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
      val_writer.close();
      train_writer.close();
      const double seconds = hpctrain::now_seconds() - t0;
      print_written(train_writer, train_opts, seconds);
      print_written(val_writer, val_opts, seconds);
    } else {
      hpctrain::write_idx_rows(train, {}, {&train_writer});
      train_writer.close();
      print_written(train_writer, train_opts, hpctrain::now_seconds() - t0);
      // A val.h5 from an earlier run would overlap this train.h5: remove it.
      const std::filesystem::path stale = std::filesystem::path(out) / "val.h5";
      std::error_code ec;
      if (std::filesystem::remove(stale, ec)) {
        std::printf("removed %s (it overlaps the new training set)\n", stale.c_str());
      }
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
  const int classes = static_cast<int>(int_option(args, "classes", 0, 1, 1000000));
  const int deflate = static_cast<int>(int_option(args, "deflate", 0, 0, 9));

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

int cmd_inspect(const std::vector<std::string>& argv) {
  const Args args = parse_args("inspect", argv, {});
  if (args.help) {
    std::cout << kInspectUsage;
    return 0;
  }
  if (args.positional.size() != 1) {
    throw UsageError("inspect: expected one FILE.h5 (see hpctrain-data inspect --help)");
  }
  hpctrain::inspect_data_file(args.positional[0], std::cout);
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
  if (command == "fashion-mnist") return cmd_fashion_mnist(rest);
  if (command == "idx") return cmd_idx(rest);
  if (command == "inspect") return cmd_inspect(rest);
  throw UsageError("unknown command '" + command + "' (see hpctrain-data --help)");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const hpctrain::UsageError& e) {
    std::cerr << e.what() << "\n";
    return hpctrain::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return hpctrain::kExitFailure;
  }
}
