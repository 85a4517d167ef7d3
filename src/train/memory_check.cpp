// The memory check before a run allocates (memory_check.hpp).
#include "train/memory_check.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "core/error.hpp"

namespace hpctrain {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

namespace {

// The number after `key` in a "key: N kB" file (/proc/meminfo, /proc/self/status); -1.
int64_t status_kib(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    int64_t kib = -1;
    if (fields >> name >> kib && name == key && kib >= 0) return kib;
  }
  return -1;
}

// The number a cgroup file holds; nullopt for "max", a missing file or anything else.
std::optional<int64_t> cgroup_number(const std::filesystem::path& path) {
  std::ifstream in(path);
  int64_t value = -1;
  if (in >> value && value >= 0) return value;
  return std::nullopt;
}

// What the memory cgroups of /proc/self/cgroup leave (limit - usage at the process's cgroup
// and each above it, the least); -1 when none has a limit.
int64_t cgroup_room(const std::string& root) {
  namespace fs = std::filesystem;
  std::ifstream in(root + "/proc/self/cgroup");
  std::string line;
  int64_t room = -1;
  while (std::getline(in, line)) {  // "ID:CONTROLLERS:PATH"
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const bool v2 = b == a + 1;  // no controllers: the unified hierarchy
    bool memory = v2;
    std::istringstream controllers(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(controllers, c, ',');) memory = memory || c == "memory";
    if (!memory) continue;
    const fs::path base = fs::path(root + "/sys/fs/cgroup") / (v2 ? "" : "memory");
    const char* limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
    const char* usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
    for (fs::path p = fs::path(line.substr(b + 1)).relative_path();; p = p.parent_path()) {
      const auto limit = cgroup_number(base / p / limit_file);
      const auto usage = cgroup_number(base / p / usage_file);
      // v1 writes "no limit" as a number near 2^63.
      if (limit && usage && *limit < (int64_t{1} << 60)) {
        const int64_t left = std::max<int64_t>(0, *limit - *usage);
        room = room < 0 ? left : std::min(room, left);
      }
      if (p.empty()) break;
    }
  }
  return room;
}

}  // namespace

double model_bytes(const ModelSize& size, int optimizer_slots, size_t act_bytes) {
  return static_cast<double>(size.params) * 4.0 * (2.0 + optimizer_slots) +
         static_cast<double>(size.state) * 4.0 +
         static_cast<double>(size.activations) * static_cast<double>(act_bytes) * 2.0;
}

MemoryRoom available_memory(const std::string& root) {
  MemoryRoom room;
  room.node = status_kib(root + "/proc/meminfo", "MemAvailable:");
  if (room.node >= 0) room.node *= 1024;
  const int64_t cgroup = cgroup_room(root);
  if (cgroup >= 0 && (room.node < 0 || cgroup < room.node)) room.node = cgroup;
  rlimit limit{};
  if (root.empty() && ::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const int64_t mapped = status_kib("/proc/self/status", "VmSize:");
    if (mapped >= 0) {
      room.process = std::max<int64_t>(0, static_cast<int64_t>(limit.rlim_cur) - mapped * 1024);
    }
  }
  return room;
}

void check_memory_fits(const std::string& source, const MemoryNeed& need, bool model_on_host,
                       const MemoryRoom& room, int local_ranks) {
  const int ranks = local_ranks > 0 ? local_ranks : 1;
  const double node_share = room.node >= 0 ? static_cast<double>(room.node) / ranks : -1.0;
  const bool by_process =
      room.process >= 0 && (node_share < 0 || static_cast<double>(room.process) < node_share);
  const double share = by_process ? static_cast<double>(room.process) : node_share;
  if (share < 0) return;
  const double host =
      need.data_bytes + need.checkpoint_bytes + (model_on_host ? need.model_bytes : 0.0);
  if (host <= share) return;
  const std::string has =
      by_process ? "this process may map only " + gib(share) + " more (ulimit -v)"
                 : "this node has " + gib(static_cast<double>(room.node)) +
                       " available (MemAvailable, or its memory cgroup's limit) for its " +
                       std::to_string(ranks) + " rank(s)";
  throw UsageError(source + ": this run needs at least " + gib(host) + " of memory per rank (" +
                   (model_on_host ? "model " + gib(need.model_bytes) + ", " : std::string()) +
                   "data " + gib(need.data_bytes) + ", checkpoints " + gib(need.checkpoint_bytes) +
                   "), but " + has +
                   ": use a smaller model (model.*) or train.batch_size, or lower "
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
