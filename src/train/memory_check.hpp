// Refusing a run that cannot fit in the node's memory before it allocates (exit 2 naming
// what to change), instead of std::bad_alloc or the kernel's OOM killer half-way into
// set-up. The estimate is a lower bound: the model's parameters, gradients and optimizer
// state, the activations and their gradients for the largest batch, the prefetch buffers
// and the cached shards; a rank may need more (workspaces, libraries). On a GPU the model
// is checked against the device's free memory, the rest against the node's.
#pragma once

#include <cstdint>
#include <string>

#include "nn/model.hpp"

namespace hpctrain {

struct MemoryNeed {
  double model_bytes = 0;       // on the device that runs the model (host memory for the CPU)
  double data_bytes = 0;        // host memory: prefetch buffers and cached shards
  double checkpoint_bytes = 0;  // host memory checkpoints are written from
};

// `bytes` as "12.3 GiB".
std::string gib(double bytes);

// What the model needs: parameters and gradients, `optimizer_slots` more arrays of the
// parameters' size (momentum, Adam's moments, accumulation and exchange buffers), and
// activations with their gradients at `act_bytes` per element.
double model_bytes(const ModelSize& size, int optimizer_slots, size_t act_bytes);

// The memory a rank may still take, in bytes (-1: unknown). node: the node's MemAvailable,
// or less where the process's memory cgroup (v2 memory.max - memory.current, v1
// memory.limit_in_bytes - memory.usage_in_bytes, at its cgroup or any above it: a Slurm
// job's --mem, a container's limit) leaves less; the node's ranks share it. process: what
// RLIMIT_AS (ulimit -v) leaves above the address space already mapped, this process's own.
struct MemoryRoom {
  int64_t node = -1;
  int64_t process = -1;
};

// Read from `root` + /proc/... and `root` + /sys/fs/cgroup/... (root "": this process, with
// its RLIMIT_AS; another root, a tree of such files made by a test, without it).
MemoryRoom available_memory(const std::string& root = "");

// Throws UsageError (`source` names the config) when `need`'s host part exceeds this rank's
// room: the node's shared by `local_ranks` ranks, at most the process's own;
// model_on_host: the model counts as host memory (CPU backend). Does nothing where the room
// is unknown.
void check_memory_fits(const std::string& source, const MemoryNeed& need, bool model_on_host,
                       const MemoryRoom& room, int local_ranks);

// Throws UsageError when the model (`model_bytes`) exceeds the `device_free` bytes of its
// GPU (free at start-up) shared by `ranks_per_device` ranks. Does nothing when `device_free`
// is negative (a CPU backend, or unknown).
void check_device_memory_fits(const std::string& source, double model_bytes, int64_t device_free,
                              int ranks_per_device);

}  // namespace hpctrain
