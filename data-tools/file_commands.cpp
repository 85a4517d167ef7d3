// hpctrain-data's commands on existing data files: split, shard, stats and inspect (the
// converters that make data files are in hpctrain_data.cpp).
#include "data-tools/file_commands.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/deadline.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data-tools/cli_args.hpp"
#include "data-tools/inspect_data.hpp"
#include "data-tools/shard.hpp"
#include "data-tools/split.hpp"
#include "data-tools/stats.hpp"
#include "data/dataset_files.hpp"

namespace hpctrain::data_cli {
namespace {

using cli::Args;
using cli::int_option;
using cli::option_or;
using cli::parse_args;
using cli::positionals;
using cli::require;

constexpr const char* kSplitUsage =
    "usage: hpctrain-data split FILE.h5 --ratios R1,R2[,R3...] --out-prefix P [--seed S]\n"
    "                           [--names A,B[,C...]] [--deflate L]\n"
    "\n"
    "Splits FILE.h5 into P-NAME.h5, one file per ratio, stratified by class: each file gets\n"
    "its share of all the rows (rounded by largest remainder, so counts add up), and every\n"
    "class is divided by the ratios as closely as those totals allow (within one row where\n"
    "possible), its rows chosen by a permutation seeded with S. Rows keep their order within\n"
    "each file; the sample type, class names and source (extended by how the part was made)\n"
    "carry over. Names default to train,test for 2 ratios, train,val,test for 3, else part0,\n"
    "part1, ... The parts of an earlier split under P that this one does not write (any\n"
    "names: those whose source says split made them as that part) are removed with it.\n"
    "Example: --ratios 85,2,13 --out-prefix data/set writes data/set-train.h5,\n"
    "data/set-val.h5 and data/set-test.h5.\n"
    "\n"
    "options:\n"
    "  --ratios R     comma-separated positive integer weights (need not add to 100)\n"
    "  --out-prefix P output path prefix\n"
    "  --seed S       seed of the permutation (default 1)\n"
    "  --names N      comma-separated part names, one per ratio\n"
    "  --deflate L    deflate compression level 0-9 (default 0: uncompressed)\n";

constexpr const char* kShardUsage =
    "usage: hpctrain-data shard FILE.h5 --parts N --out-prefix P [--deflate L]\n"
    "\n"
    "Splits FILE.h5 into N files of contiguous row ranges, P-00000-of-0000N.h5 ... (shard\n"
    "numbers from 0, at least five digits), whose sizes differ by at most one row (the\n"
    "first shards hold the extra rows). Type, class names and source carry over. Earlier\n"
    "shards under P of another count (P-*-of-*.h5) are removed with it.\n"
    "\n"
    "options:\n"
    "  --parts N      number of shards (1 to the number of rows, at most 1000000)\n"
    "  --out-prefix P output path prefix\n"
    "  --deflate L    deflate compression level 0-9 (default 0: uncompressed)\n";

constexpr const char* kInspectUsage =
    "usage: hpctrain-data inspect FILE.h5 [--timeout SECONDS]\n"
    "\n"
    "Validates a data file and prints its shape, type, classes with a label histogram,\n"
    "attributes and the pixel range of the first samples. Gives up with exit 1 after\n"
    "--timeout seconds (default 60; 0: no limit): HDF5 loops on some damaged files.\n";

}  // namespace

int cmd_split(const std::vector<std::string>& argv) {
  const std::string cmd = "split";
  const Args args = parse_args(cmd, argv, {"ratios", "out-prefix", "seed", "names", "deflate"});
  if (args.help) {
    std::cout << kSplitUsage;
    return 0;
  }
  const std::string input = positionals(args, cmd, 1, "one input FILE.h5")[0];
  SplitOptions o;
  o.weights = parse_split_weights(require(args, cmd, "ratios"), "--ratios");
  const std::string prefix = require(args, cmd, "out-prefix");
  o.names = args.options.count("names") > 0
                ? parse_split_names(args.options.at("names"), o.weights.size(), "--names")
                : default_split_names(o.weights.size());
  o.seed = static_cast<uint64_t>(int_option(args, "seed", 1, 0, INT64_MAX));
  o.deflate_level = static_cast<int>(int_option(args, "deflate", 0, 0, 9));

  const double t0 = now_seconds();
  const SplitReport r = split_data_file(input, prefix, o);
  for (size_t p = 0; p < r.paths.size(); ++p) {
    std::printf("wrote %s: %lld samples\n", r.paths[p].c_str(), static_cast<long long>(r.rows[p]));
  }
  std::printf("split %s in %.2f s\n", input.c_str(), now_seconds() - t0);
  return 0;
}

int cmd_shard(const std::vector<std::string>& argv) {
  const std::string cmd = "shard";
  const Args args = parse_args(cmd, argv, {"parts", "out-prefix", "deflate"});
  if (args.help) {
    std::cout << kShardUsage;
    return 0;
  }
  const std::string input = positionals(args, cmd, 1, "one input FILE.h5")[0];
  const int64_t parts = int_option(args, "parts", 0, 1, 1000000);
  if (parts == 0) require(args, cmd, "parts");
  const std::string prefix = require(args, cmd, "out-prefix");
  const int deflate = static_cast<int>(int_option(args, "deflate", 0, 0, 9));

  const double t0 = now_seconds();
  const ShardReport r = shard_data_file(input, prefix, parts, deflate);
  for (size_t i = 0; i < r.paths.size(); ++i) {
    std::printf("wrote %s: rows [%lld, %lld)\n", r.paths[i].c_str(),
                static_cast<long long>(r.bounds[i]), static_cast<long long>(r.bounds[i + 1]));
  }
  std::printf("sharded %s in %.2f s\n", input.c_str(), now_seconds() - t0);
  return 0;
}

constexpr const char* kStatsUsage =
    "usage: hpctrain-data stats FILES.h5... [--dry-run]\n"
    "\n"
    "Computes the per-channel mean and standard deviation of the images of FILES, read as\n"
    "one data set (as data.train lists them), as the network receives them (uint8 scaled\n"
    "to [0, 1]), prints them and stores them in every file as the root attributes mean and\n"
    "std (float64 [C], replacing earlier ones), which data.normalize: auto reads; each\n"
    "file through a copy (FILE.tmp, renamed over it: a failure leaves it as it was).\n"
    "Compute them on the training set only.\n"
    "\n"
    "options:\n"
    "  --dry-run      print the figures, change no file\n";

int cmd_stats(std::vector<std::string> argv) {
  // --dry-run is a flag (parse_args options take values).
  const auto flag = std::remove(argv.begin(), argv.end(), std::string("--dry-run"));
  const bool dry_run = flag != argv.end();
  argv.erase(flag, argv.end());
  const Args args = parse_args("stats", argv, {});
  if (args.help) {
    std::cout << kStatsUsage;
    return 0;
  }
  if (args.positional.empty()) {
    throw UsageError("stats: expected data FILES (see hpctrain-data stats --help)");
  }
  // Each file is rewritten through a copy, FILE.tmp beside it (beside a link's target): an
  // input under such a name would be replaced before it is read.
  for (const std::string& a : args.positional) {
    std::error_code ec;
    const std::filesystem::path temp = std::filesystem::weakly_canonical(a, ec).string() + ".tmp";
    for (const std::string& b : args.positional) {
      std::error_code ec2;
      if (!ec && std::filesystem::weakly_canonical(b, ec2) == temp && !ec2) {
        throw UsageError(b + ": is the name of the copy through which stats rewrites " + a +
                         " (rename it)");
      }
    }
  }
  const double t0 = now_seconds();
  // A file listed twice (by two names) would count its rows twice, as in data.train.
  const ChannelStats s = channel_stats(expand_data_paths(args.positional, "stats"));
  std::printf("%lld rows in %.2f s\n", static_cast<long long>(s.rows), now_seconds() - t0);
  for (size_t ch = 0; ch < s.mean.size(); ++ch) {
    std::printf("channel %zu: mean %.6f std %.6f\n", ch, s.mean[ch], s.std[ch]);
  }
  if (dry_run) return 0;
  for (size_t ch = 0; ch < s.std.size(); ++ch) {
    if (!(s.std[ch] > 0)) {  // training would refuse it (data.normalize: auto)
      throw UsageError("stats: channel " + std::to_string(ch) +
                       " has the same value everywhere (std 0): it cannot be normalised; "
                       "nothing stored");
    }
  }
  for (const std::string& path : args.positional) {
    store_channel_stats(path, s);
    std::printf("stored mean and std in %s\n", path.c_str());
  }
  return 0;
}

int cmd_inspect(const std::vector<std::string>& argv) {
  const Args args = parse_args("inspect", argv, {"timeout"});
  if (args.help) {
    std::cout << kInspectUsage;
    return 0;
  }
  if (args.positional.size() != 1) {
    throw UsageError("inspect: expected one FILE.h5 (see hpctrain-data inspect --help)");
  }
  const std::string& path = args.positional[0];
  const std::string timeout = option_or(args, "timeout", "");
  const double seconds = timeout.empty() ? kInspectSeconds : inspect_timeout(timeout);
  const Deadline deadline(seconds, inspect_timeout_message(path, seconds), kExitFailure);
  inspect_data_file(path, std::cout);
  return 0;
}

}  // namespace hpctrain::data_cli
