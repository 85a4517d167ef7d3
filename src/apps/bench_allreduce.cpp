// All-reduce benchmark. For each message size and algorithm: warm up, then time
// `iters` back-to-back all-reduces, `reps` times; the time of a repetition is the
// slowest rank's, and the median repetition is reported.
//   algbw = bytes / time;  busbw = algbw * 2 (n - 1) / n   (nccl-tests)
// Results go to stdout as a table and, with --out, as JSON.
#include "apps/bench_allreduce.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "apps/bench_checkpoint.hpp"
#include "backend/cuda_backend.hpp"
#include "comm/agreement.hpp"
#include "comm/communicator.hpp"
#include "comm/device_group.hpp"
#include "comm/mpi_env.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/option_words.hpp"
#include "core/timer.hpp"
#include "data-tools/cli_args.hpp"
#include "data-tools/dataset_writer.hpp"

namespace hpctrain {
namespace {

constexpr const char* kBenchUsage =
    "usage: hpctrain bench allreduce [--min-bytes N] [--max-bytes N] [--iters N] [--reps N]\n"
    "                                [--chunk-bytes N] [--device cpu|cuda] [--out FILE.json]\n"
    "                                [--algorithms ring,mpi,nccl]\n"
    "\n"
    "Measures ring all-reduce and MPI_Allreduce bus bandwidth for float32 messages\n"
    "from --min-bytes (default 4096) to --max-bytes (default 268435456), doubling.\n"
    "--algorithms keeps only the named ones (default: every one that applies).\n"
    "Run under mpirun with 2 or more ranks.\n"
    "With --device cuda each rank's message lives on its GPU (node-local rank modulo the\n"
    "visible GPUs): ring and mpi stage it through pinned host memory, as training does,\n"
    "and nccl (built with NCCL, each rank with its own GPU) sums device memory.\n"
    "\n"
    "usage: hpctrain bench checkpoint --help   (checkpoint write bandwidth)\n";

int64_t parse_size(const std::string& key, const std::string& value) {
  const std::optional<int64_t> v = cli::parse_integer(value);
  if (!v || *v <= 0) {
    throw UsageError("bench allreduce: " + key + ": expected a positive integer, got '" + value +
                     "'");
  }
  return *v;
}

// "ring,mpi" -> {"ring", "mpi"}; anything else is a usage error.
std::vector<std::string> split_algorithms(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    if ((name != "ring" && name != "mpi" && name != "nccl") || list.back() == ',') {
      throw UsageError(
          "bench allreduce: --algorithms: expected a comma list of ring, mpi, "
          "nccl, got '" +
          list + "'");
    }
    out.push_back(name);
  }
  if (out.empty()) throw UsageError("bench allreduce: --algorithms: expected a name");
  return out;
}

struct Point {
  const char* algorithm;
  int64_t bytes;
  double seconds, algbw, busbw;
};

}  // namespace

int cmd_bench(int* argc, char*** argv, const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "checkpoint") {
    return cmd_bench_checkpoint({args.begin() + 1, args.end()});
  }
  if (args.empty() || args[0] != "allreduce") {
    if (is_help(args)) {
      if (prints_for_all_ranks()) std::cout << kBenchUsage;
      return kExitOk;
    }
    throw UsageError("bench: expected 'allreduce' or 'checkpoint' (see hpctrain bench --help)");
  }
  int64_t min_bytes = 4096, max_bytes = int64_t{256} << 20, iters = 0, reps = 5;
  int64_t chunk_bytes = 1 << 20;
  std::string out_path, device = "cpu";
  std::vector<std::string> wanted;                // --algorithms; empty: all
  if (args.size() == 2 && args[1] == "--help") {  // "allreduce --help" (the dispatcher's)
    if (prints_for_all_ranks()) std::cout << kBenchUsage;
    return kExitOk;
  }
  static const char* const kOptions[] = {"--min-bytes", "--max-bytes",   "--iters",
                                         "--reps",      "--chunk-bytes", "--out",
                                         "--device",    "--algorithms"};
  for (size_t i = 1; i < args.size(); ++i) {
    if (std::find(std::begin(kOptions), std::end(kOptions), args[i]) == std::end(kOptions)) {
      throw UsageError("bench allreduce: unknown option '" + args[i] + "'");
    }
    if (i + 1 >= args.size()) throw UsageError("bench allreduce: " + args[i] + " needs a value");
    const std::string& v = args[i + 1];
    if (args[i] == "--min-bytes")
      min_bytes = parse_size(args[i], v);
    else if (args[i] == "--max-bytes")
      max_bytes = parse_size(args[i], v);
    else if (args[i] == "--iters")
      iters = parse_size(args[i], v);
    else if (args[i] == "--reps")
      reps = parse_size(args[i], v);
    else if (args[i] == "--chunk-bytes")
      chunk_bytes = parse_size(args[i], v);
    else if (args[i] == "--out")
      out_path = v;
    else if (args[i] == "--device")
      device = v;
    else
      wanted = split_algorithms(v);
    ++i;
  }

  // Messages are whole float32 values: 4097 bytes measured 4096 and reported 4097.
  const std::pair<const char*, int64_t> sizes[] = {
      {"--min-bytes", min_bytes}, {"--max-bytes", max_bytes}, {"--chunk-bytes", chunk_bytes}};
  for (const auto& [option, bytes] : sizes) {
    if (bytes % 4 != 0) {
      throw UsageError(std::string("bench allreduce: ") + option +
                       ": expected a multiple of 4 (whole float32 values), got " +
                       std::to_string(bytes));
    }
  }
  if (min_bytes > max_bytes) {
    throw UsageError("bench allreduce: --min-bytes " + std::to_string(min_bytes) +
                     " is above --max-bytes " + std::to_string(max_bytes));
  }
  if (device != "cpu" && device != "cuda") {
    throw UsageError("bench allreduce: --device: expected cpu or cuda, got '" + device + "'");
  }
  if (!out_path.empty()) check_output_file(out_path);  // before the benchmark, not after

  MpiEnv env(argc, argv);
  Communicator comm(MPI_COMM_WORLD, static_cast<size_t>(chunk_bytes));
  const int n = comm.size();
  std::vector<float> buffer;
  // --device cuda: the message on the GPU, `buffer` (pinned) the staging area.
  std::unique_ptr<Backend> gpu;
  DeviceArray<float> message;
  std::unique_ptr<float, std::function<void(float*)>> pinned;
  // Set-up failures are agreed on: the lowest failing rank prints its line, all exit alike.
  int code = run_and_agree(MPI_COMM_WORLD, [&] {
    try {
      buffer.resize(static_cast<size_t>(max_bytes / 4));
    } catch (const std::bad_alloc&) {
      throw UsageError("bench allreduce: --max-bytes: cannot allocate " +
                       std::to_string(max_bytes) + " bytes here");
    }
    if (device != "cuda") return;
    const int visible = cuda_device_count();
    CudaBackendOptions o;
    o.device = visible > 0 ? env.local_rank() % visible : 0;
    gpu = make_cuda_backend(o);
    message = DeviceArray<float>(*gpu, buffer.size());
    gpu->pin_host(buffer.data(), buffer.size() * sizeof(float));
    pinned = {buffer.data(), [&gpu](float* p) { gpu->unpin_host(p); }};
  });
  if (code != 0) return code;
  std::vector<AllreduceAlgorithm> algorithms = {AllreduceAlgorithm::kRing,
                                                AllreduceAlgorithm::kMpi};
  if (gpu) {
    if (gpu->has_device_collectives() && !ranks_share_a_device(comm, gpu->device_id())) {
      join_device_collectives(comm, *gpu);
      algorithms.push_back(AllreduceAlgorithm::kNccl);
    }
  }
  // One all-reduce of `count` floats as the trainer runs it on this device.
  auto allreduce = [&](size_t count, AllreduceAlgorithm algo) {
    if (!gpu) {
      comm.allreduce_sum(buffer.data(), count, algo);
    } else if (algo == AllreduceAlgorithm::kNccl) {
      gpu->allreduce_sum(message.data(), count);
    } else {
      gpu->copy_to_host(buffer.data(), message.data(), count * sizeof(float));
      comm.allreduce_sum(buffer.data(), count, algo);
      gpu->copy_to_device(message.data(), buffer.data(), count * sizeof(float));
    }
  };
  code = run_and_agree(MPI_COMM_WORLD, [&] {
    if (wanted.empty()) return;
    std::erase_if(algorithms, [&](AllreduceAlgorithm a) {
      return std::find(wanted.begin(), wanted.end(), to_string(a)) == wanted.end();
    });
    if (algorithms.empty()) {
      throw UsageError(
          "bench allreduce: --algorithms: none of them applies here (nccl needs "
          "--device cuda, NCCL and a GPU per rank)");
    }
  });
  if (code != 0) return code;
  std::vector<Point> points;
  log_info("# all-reduce, " + std::to_string(n) + " ranks, messages in " + device +
           " memory; times are medians of " + std::to_string(reps) + " repetitions");
  log_info("#      bytes  algorithm     time_us   algbw_GB/s   busbw_GB/s");
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const size_t count = static_cast<size_t>(bytes / 4);
    // Enough iterations for ~20 ms of work at ~5 GB/s, at least 5.
    const int64_t it =
        iters > 0 ? iters : std::clamp<int64_t>((int64_t{100} << 20) / bytes, 5, 1000);
    for (AllreduceAlgorithm algo : algorithms) {
      std::fill(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(count), 1.0f);
      if (gpu) gpu->copy_to_device(message.data(), buffer.data(), count * sizeof(float));
      for (int w = 0; w < 2; ++w) allreduce(count, algo);
      if (gpu) gpu->synchronize();
      std::vector<double> samples;
      for (int64_t r = 0; r < reps; ++r) {
        comm.barrier();
        const double t0 = now_seconds();
        for (int64_t k = 0; k < it; ++k) allreduce(count, algo);
        if (gpu) gpu->synchronize();
        double t = (now_seconds() - t0) / static_cast<double>(it);
        comm.allreduce_max(&t, 1);
        samples.push_back(t);
      }
      std::sort(samples.begin(), samples.end());
      const double t = samples[samples.size() / 2];
      const double algbw = static_cast<double>(bytes) / t / 1e9;
      const double busbw = algbw * 2.0 * (n - 1) / n;
      points.push_back({to_string(algo), bytes, t, algbw, busbw});
      char line[128];
      std::snprintf(line, sizeof(line), "%12lld  %-9s %11.1f %12.3f %12.3f",
                    static_cast<long long>(bytes), to_string(algo), t * 1e6, algbw, busbw);
      log_info(line);
    }
  }
  if (comm.rank() == 0 && !out_path.empty()) {
    std::ostringstream o;
    o << "{\n  \"benchmark\": \"allreduce\",\n  \"device\": \"" << device
      << "\",\n  \"ranks\": " << n << ",\n  \"chunk_bytes\": " << chunk_bytes
      << ",\n  \"reps\": " << reps << ",\n  \"points\": [\n";
    for (size_t i = 0; i < points.size(); ++i) {
      const Point& p = points[i];
      o << "    {\"algorithm\": \"" << p.algorithm << "\", \"bytes\": " << p.bytes
        << ", \"time_s\": " << p.seconds << ", \"algbw_GBps\": " << p.algbw
        << ", \"busbw_GBps\": " << p.busbw << "}" << (i + 1 < points.size() ? "," : "") << "\n";
    }
    o << "  ]\n}\n";
    write_file_atomic(out_path, o.str());  // a full disk is an error, never an empty file
  }
  return kExitOk;
}

}  // namespace hpctrain
