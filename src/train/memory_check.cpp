// The memory check before a run allocates (memory_check.hpp).
#include "train/memory_check.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"

namespace hpctrain {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

double model_bytes(const ModelSize& size, int optimizer_slots, size_t act_bytes) {
  return static_cast<double>(size.params) * 4.0 * (2.0 + optimizer_slots) +
         static_cast<double>(size.state) * 4.0 +
         static_cast<double>(size.activations) * static_cast<double>(act_bytes) * 2.0;
}

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    int64_t kib = -1;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" && kib >= 0) return kib * 1024;
  }
  return -1;
}

void check_memory_fits(const std::string& source, const MemoryNeed& need, bool model_on_host,
                       int64_t available, int local_ranks) {
  if (available < 0) return;
  const double host = need.data_bytes + (model_on_host ? need.model_bytes : 0.0);
  const double share = static_cast<double>(available) / (local_ranks > 0 ? local_ranks : 1);
  if (host <= share) return;
  throw UsageError(source + ": this run needs at least " + gib(host) + " of memory per rank (" +
                   (model_on_host ? "model " + gib(need.model_bytes) + ", " : std::string()) +
                   "data " + gib(need.data_bytes) + "), but this node has " +
                   gib(static_cast<double>(available)) + " available for its " +
                   std::to_string(local_ranks) +
                   " rank(s): use a smaller model (model.*) or train.batch_size, or lower "
                   "data.cache_mb or data.prefetch_depth");
}

void check_device_memory_fits(const std::string& source, double model_bytes, int64_t device_free,
                              int ranks_per_device) {
  if (device_free < 0) return;
  const int ranks = ranks_per_device > 0 ? ranks_per_device : 1;
  if (model_bytes <= static_cast<double>(device_free) / ranks) return;
  throw UsageError(source + ": the model needs at least " + gib(model_bytes) +
                   " of GPU memory per rank, but its GPU has " +
                   gib(static_cast<double>(device_free)) + " free for " + std::to_string(ranks) +
                   " rank(s): use a smaller model (model.*) or train.batch_size, precision "
                   "bf16, or more GPUs");
}

}  // namespace hpctrain
