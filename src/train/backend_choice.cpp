#include "train/backend_choice.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"
#include "backend/recording_backend.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

bool env_is_one(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

}  // namespace

DType activation_type(Precision precision) {
  return precision == Precision::kBf16   ? DType::kBF16
         : precision == Precision::kFp16 ? DType::kF16
                                         : DType::kF32;
}

// device cuda, or auto with a GPU visible: the CUDA backend on the node-local rank's device
// (modulo the devices visible, so ranks share GPUs when there are more ranks than GPUs, and
// each sees device 0 under Slurm's --gpus-per-task=1). Else, or for a rank cpu_ranks lists,
// the CPU backend;
// HPCTRAIN_STAGE_CPU=1 makes it stage memory as a GPU backend would, and
// HPCTRAIN_RECORD_CPU=1 record step graphs as the CUDA backend does, refusing the N-th
// operation of each recording with HPCTRAIN_RECORD_CPU_REFUSE=N (for tests).
std::unique_ptr<Backend> make_backend(const Config& config, int threads, int rank, int local_rank) {
  const IntList& cpu = config.cpu_ranks;
  const bool on_cpu = std::find(cpu.begin(), cpu.end(), rank) != cpu.end();
  // device cpu asks no driver (a CPU rank loads none of NVIDIA's libraries for computing).
  const int devices = on_cpu || config.device == Device::kCpu ? 0 : cuda_device_count();
  const DType act = activation_type(config.precision);
  if (!on_cpu &&
      (config.device == Device::kCuda || (config.device == Device::kAuto && devices > 0))) {
    CudaBackendOptions options;
    options.device = devices > 0 ? local_rank % devices : 0;
    options.deterministic = config.run.deterministic;
    options.tf32 = config.precision == Precision::kTf32;
    options.act_type = act;
    // auto: nhwc for 16 bits (float32 NHWC is asked for, until timed against NCHW)
    options.channels_last =
        config.layout == Layout::kNhwc || (act != DType::kF32 && config.layout == Layout::kAuto);
    options.cudnn_rnn = config.rnn == RnnEngine::kCudnn   ? CudaBackendOptions::CudnnRnn::kRequired
                        : config.rnn == RnnEngine::kSteps ? CudaBackendOptions::CudnnRnn::kOff
                                                          : CudaBackendOptions::CudnnRnn::kAuto;
    try {
      return make_cuda_backend(options);
    } catch (const UsageError& e) {  // no device, no CUDA build, a module that does not load
      throw UsageError(config.source_file + ": " + e.what());
    }
  }
  if (config.layout == Layout::kNhwc && !on_cpu) {  // a rank of cpu_ranks computes NCHW
    throw UsageError(config.source_file +
                     ": layout: nhwc needs a GPU, and none is visible (the CPU computes in NCHW)");
  }
  if (config.rnn == RnnEngine::kCudnn && !on_cpu) {
    throw UsageError(config.source_file +
                     ": rnn: cudnn needs a GPU, and none is visible (the CPU steps)");
  }
  auto host = std::make_unique<CpuBackend>(threads, CpuBackend::kDefaultConvChunkBytes,
                                           env_is_one("HPCTRAIN_STAGE_CPU"), act);
  if (!env_is_one("HPCTRAIN_RECORD_CPU")) return host;
  int refuse_at = 0;
  if (const char* n = std::getenv("HPCTRAIN_RECORD_CPU_REFUSE")) {
    char* end = nullptr;
    const long v = std::strtol(n, &end, 10);
    if (end == n || *end != '\0' || v < 1 || v > 1000000) {
      throw UsageError(
          std::string("HPCTRAIN_RECORD_CPU_REFUSE: expected a positive integer, got '") + n + "'");
    }
    refuse_at = static_cast<int>(v);
  }
  return make_recording_backend(std::move(host), refuse_at);
}

}  // namespace hpctrain
