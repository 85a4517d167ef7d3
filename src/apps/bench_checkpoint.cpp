// Checkpoint benchmark. Each repetition, interleaved so both see the same disk
// state:
//   plain:      write() the bytes in 8 MiB pieces, fsync, close, rename, fsync dir
//   checkpoint: write_checkpoint_file (HDF5, CRC-32C, fsync, rename, fsync dir)
//   async:      the trainer's path: hand the live arrays to AsyncCheckpointWriter,
//               which snapshots them (into recycled memory) during a simulated
//               training step of --step-ms; blocked = submit + the wait for the
//               snapshot before the next update; then wait for the write
// Medians over the repetitions; bandwidth = bytes / time.
#include "apps/bench_checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <new>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "checkpoint/async_writer.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/option_words.hpp"
#include "core/timer.hpp"
#include "data-tools/cli_args.hpp"
#include "data-tools/dataset_writer.hpp"
#include "train/signals.hpp"

namespace hpctrain {
namespace {

// Removes a folder and what is in it when it goes out of scope.
struct RemovedAtExit {
  std::string dir;
  explicit RemovedAtExit(std::string folder) : dir(std::move(folder)) {}
  RemovedAtExit(const RemovedAtExit&) = delete;
  RemovedAtExit& operator=(const RemovedAtExit&) = delete;
  ~RemovedAtExit() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

constexpr const char* kUsage =
    "usage: hpctrain bench checkpoint [--bytes N] [--reps N] [--dir DIR] [--step-ms T]\n"
    "                                 [--out FILE.json]\n"
    "\n"
    "Writes checkpoints of N bytes (default 268435456, a multiple of 8: parameters and\n"
    "momentum, half each) on the file system of DIR (default .) and compares them with a plain\n"
    "sequential write of the same bytes; also measures how long the training thread is\n"
    "blocked per asynchronous checkpoint when a training step of T ms (default 100)\n"
    "follows it (the snapshot copy overlaps the step). The files go to a new folder\n"
    "DIR/hpctrain-bench-checkpoint.XXXXXX, which is removed afterwards; nothing else in\n"
    "DIR is touched.\n";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void plain_write(const std::string& path, const std::vector<float>& a,
                 const std::vector<float>& b) {
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(temp + ": " + std::strerror(errno));
  for (const std::vector<float>* v : {&a, &b}) {
    const char* p = reinterpret_cast<const char*>(v->data());
    size_t left = v->size() * sizeof(float);
    while (left > 0) {
      const ssize_t n = ::write(fd, p, std::min<size_t>(left, 8u << 20));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(temp + ": write: " + std::strerror(errno));
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  if (::close(fd) != 0) throw Error(temp + ": close: " + std::strerror(errno));
  commit_file(temp, path);
}

// The integer value of option `key`, at least `least`; anything else is bad input.
int64_t whole_number(const std::string& key, const std::string& value, int64_t least) {
  const std::optional<int64_t> n = cli::parse_integer(value);
  if (!n || *n < least) {
    throw UsageError("bench checkpoint: " + key +
                     ": expected an integer >= " + std::to_string(least) + ", got '" + value + "'");
  }
  return *n;
}

}  // namespace

int cmd_bench_checkpoint(const std::vector<std::string>& args) {
  int64_t bytes = int64_t{256} << 20, reps = 5;
  double step_ms = 100;
  std::string parent = ".", out_path;
  if (is_help(args)) {
    if (prints_for_all_ranks()) std::cout << kUsage;
    return kExitOk;
  }
  static const char* const kOptions[] = {"--bytes", "--reps", "--dir", "--step-ms", "--out"};
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::find(std::begin(kOptions), std::end(kOptions), args[i]) == std::end(kOptions)) {
      throw UsageError("bench checkpoint: unknown option '" + args[i] + "'");
    }
    if (i + 1 >= args.size()) throw UsageError("bench checkpoint: " + args[i] + " needs a value");
    const std::string& key = args[i];
    const std::string& v = args[++i];
    if (key == "--bytes") {
      bytes = whole_number(key, v, 8);
      if (bytes % 8 != 0) {
        throw UsageError(
            "bench checkpoint: --bytes: expected a multiple of 8 (two arrays of "
            "float32 values), got " +
            v);
      }
    } else if (key == "--reps") {
      reps = whole_number(key, v, 1);
    } else if (key == "--dir") {
      parent = v;
    } else if (key == "--step-ms") {
      const std::optional<double> ms = cli::parse_number(v);
      if (!ms || !std::isfinite(*ms) || *ms < 0 || *ms > 1e6) {
        throw UsageError("bench checkpoint: --step-ms: expected milliseconds in [0, 1e6], got '" +
                         v + "'");
      }
      step_ms = *ms;
    } else {
      out_path = v;
    }
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(parent, ec)) {
    throw UsageError("bench checkpoint: --dir " + parent + ": not a directory");
  }
  if (!out_path.empty()) check_output_file(out_path);  // before the benchmark, not after
  const size_t n = static_cast<size_t>(bytes / 8);     // two arrays of n floats
  std::vector<float> params, velocity;
  try {
    params.resize(n);
    velocity.resize(n);
  } catch (const std::bad_alloc&) {
    throw UsageError("bench checkpoint: --bytes: cannot allocate " + std::to_string(bytes) +
                     " bytes here");
  }
  // A folder of its own, so that removing it afterwards removes only what it wrote: also
  // after a failure (a full disk) or a stop signal (SIGINT, SIGTERM, SIGUSR1: the repetition
  // under way ends, the folder goes, then the signal ends the process as it would have).
  install_stop_signals();
  std::string dir = parent + "/hpctrain-bench-checkpoint.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    throw UsageError("bench checkpoint: --dir: cannot make a folder in " + parent + ": " +
                     std::strerror(errno));
  }
  const RemovedAtExit folder(dir);
  for (size_t i = 0; i < n; ++i) {
    params[i] = static_cast<float>(i % 1000) * 1e-3f;
    velocity[i] = -params[i];
  }
  const double total = static_cast<double>(2 * n * sizeof(float));
  std::vector<double> plain_s, ckpt_s, blocked_s, async_write_s;
  AsyncCheckpointWriter writer(dir + "/async", 1, "bench");
  CheckpointState sync_state;
  sync_state.steps_per_epoch = 1;
  sync_state.strategy = "allreduce";
  sync_state.arrays[kParamsArray] = params;
  sync_state.arrays[kVelocityArray] = velocity;
  for (int64_t r = 0; r < reps && stop_signal() == 0; ++r) {
    // Alternate which goes first, so neither always meets the other's writeback.
    for (int turn = 0; turn < 2; ++turn) {
      const double t0 = now_seconds();
      if ((turn + r) % 2 == 0) {
        plain_write(dir + "/plain.bin", params, velocity);
        plain_s.push_back(now_seconds() - t0);
        std::filesystem::remove(dir + "/plain.bin");
      } else {
        sync_state.step = r;
        write_checkpoint_file(dir + "/sync.h5", sync_state);
        ckpt_s.push_back(now_seconds() - t0);
        std::filesystem::remove(dir + "/sync.h5");
      }
    }

    // The trainer's path: hand over the live arrays; the writer snapshots them
    // while one training step (--step-ms) runs, and the next update waits for
    // the snapshot.
    // Read before the submit: a write shorter than the step has finished by its end.
    const double before = writer.stats().write_seconds;
    double t0 = now_seconds();
    CheckpointState a = writer.recycle();
    a.step = r;
    a.steps_per_epoch = 1;
    a.strategy = "allreduce";
    writer.submit(std::move(a), {SnapshotSource{kParamsArray, params.data(), n},
                                 SnapshotSource{kVelocityArray, velocity.data(), n}});
    double blocked = now_seconds() - t0;
    const double step_end = now_seconds() + step_ms * 1e-3;
    while (now_seconds() < step_end) std::this_thread::sleep_for(std::chrono::microseconds(100));
    t0 = now_seconds();
    writer.wait_snapshot();
    blocked += now_seconds() - t0;
    blocked_s.push_back(blocked);
    writer.wait();
    async_write_s.push_back(writer.stats().write_seconds - before);
  }
  if (const int sig = stop_signal(); sig != 0) {
    writer.wait();
    std::filesystem::remove_all(dir);
    std::signal(sig, SIG_DFL);  // ended by it, as it would have been (128 + N)
    std::raise(sig);
  }

  const double plain = median(plain_s), ckpt = median(ckpt_s), blocked = median(blocked_s),
               async_write = median(async_write_s);
  char line[512];
  std::snprintf(line, sizeof(line),
                "bytes %.0f  plain write %.3f s (%.0f MB/s)  checkpoint %.3f s (%.0f MB/s)  "
                "ratio %.2f\nasync: blocked %.4f s per checkpoint, write %.3f s: blocked/write "
                "%.3f\n",
                total, plain, total / plain / 1e6, ckpt, total / ckpt / 1e6, plain / ckpt, blocked,
                async_write, blocked / async_write);
  std::cout << line;
  if (!out_path.empty()) {
    std::ostringstream o;
    auto list = [&](const std::vector<double>& v) {
      std::string s = "[";
      char x[32];
      for (size_t i = 0; i < v.size(); ++i) {
        std::snprintf(x, sizeof(x), "%.9g", v[i]);
        s += (i ? ", " : "") + std::string(x);
      }
      return s + "]";
    };
    o << "{\n  \"benchmark\": \"checkpoint\",\n  \"bytes\": " << bytes << ",\n  \"reps\": " << reps
      << ",\n  \"plain_write_s\": " << list(plain_s)
      << ",\n  \"checkpoint_write_s\": " << list(ckpt_s)
      << ",\n  \"async_blocked_s\": " << list(blocked_s)
      << ",\n  \"async_write_s\": " << list(async_write_s) << ",\n  \"step_ms\": " << step_ms
      << ",\n  \"median_plain_MBps\": " << total / plain / 1e6
      << ",\n  \"median_checkpoint_MBps\": " << total / ckpt / 1e6
      << ",\n  \"checkpoint_vs_plain\": " << plain / ckpt << ",\n  \"target_vs_plain\": 0.8"
      << ",\n  \"blocked_over_write\": " << blocked / async_write
      << ",\n  \"target_blocked_over_write\": 0.1\n}\n";
    write_file_atomic(out_path, o.str());  // a full disk is an error, never an empty file
  }
  return kExitOk;
}

}  // namespace hpctrain
