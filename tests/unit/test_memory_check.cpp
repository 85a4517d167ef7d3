// The start-up memory check (train/memory_check): the estimate's arithmetic, and a run
// that does not fit is refused with one line naming what to change.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/usage_error.hpp"
#include "train/checkpointing.hpp"
#include "train/memory_check.hpp"

namespace hpctrain {
namespace {

TEST(MemoryCheck, ModelBytesCountParametersGradientsSlotsAndActivations) {
  const ModelSize size{1000, 10, 500};
  // (2 + 1) * 4 * 1000 + 4 * 10 + 2 * 4 * 500
  EXPECT_DOUBLE_EQ(model_bytes(size, 1, 4), 12000.0 + 40.0 + 4000.0);
  // Adam's two moments and an exchange buffer; 2-byte activations.
  EXPECT_DOUBLE_EQ(model_bytes(size, 3, 2), 20000.0 + 40.0 + 2000.0);
}

TEST(MemoryCheck, RefusesWhatTheNodeCannotHoldAndSaysWhy) {
  MemoryNeed need;
  need.model_bytes = 6.0 * (1 << 30);
  need.data_bytes = 1.0 * (1 << 30);
  const int64_t gib = int64_t{1} << 30;
  check_memory_fits("a.yaml", need, true, {16 * gib, -1}, 2);  // 7 GiB of 8 per rank
  check_memory_fits("a.yaml", need, false, {3 * gib, -1}, 2);  // on a GPU: data only, 1 of 1.5
  check_memory_fits("a.yaml", need, true, {-1, -1}, 1);        // unknown: not checked
  check_memory_fits("a.yaml", need, true, {-1, 8 * gib}, 4);   // ulimit -v: the process's own
  test::expect_usage_error(
      [&] {
        check_memory_fits("a.yaml", need, true, {12 * gib, -1}, 2);
      },
      {"a.yaml: this run needs at least 7.0 GiB of memory per rank", "model 6.0 GiB",
       "data 1.0 GiB", "12.0 GiB available", "for its 2 rank(s)", "train.batch_size",
       "data.cache_mb"});
  test::expect_usage_error(
      [&] {
        check_memory_fits("a.yaml", need, true, {64 * gib, gib}, 2);
      },
      {"this process may map only 1.0 GiB more (ulimit -v)"});
  // The host copy checkpoints are written from counts on a GPU too.
  need.checkpoint_bytes = 1.0 * (1 << 30);
  check_memory_fits("a.yaml", need, false, {4 * gib, -1}, 2);  // 2 GiB of 2
  test::expect_usage_error(
      [&] {
        check_memory_fits("a.yaml", need, false, {3 * gib, -1}, 2);
      },
      {"a.yaml: this run needs at least 2.0 GiB of memory per rank (data 1.0 GiB, "
       "checkpoints 1.0 GiB)"});
}

// Rank 0's copy of what a checkpoint stores (parameters and the optimizer's per-parameter
// arrays; each rank's under `average`, with the gather buffers), model state included; a
// strategy average's other ranks send from a buffer of the parameters' size.
TEST(MemoryCheck, CheckpointsReserveTheirHostCopyOnRankZero) {
  JobShape job;
  job.world_size = 3;
  // 1000 parameters, 10 state values, Adam's two moments.
  EXPECT_DOUBLE_EQ(TrainingCheckpoints::reserved_bytes(job, 1000, 10, 2), 4.0 * 3000 + 40);
  job.one_stored_state = false;
  EXPECT_DOUBLE_EQ(TrainingCheckpoints::reserved_bytes(job, 1000, 10, 2),
                   4.0 * 1000 * (3 * 3 + 3 + 1) + 40);
  job.rank = 2;
  EXPECT_DOUBLE_EQ(TrainingCheckpoints::reserved_bytes(job, 1000, 10, 2), 4000.0);
  job.one_stored_state = true;
  EXPECT_DOUBLE_EQ(TrainingCheckpoints::reserved_bytes(job, 1000, 10, 2), 0.0);
  job = JobShape{};  // one rank: one copy, whatever the strategy
  job.one_stored_state = false;
  EXPECT_DOUBLE_EQ(TrainingCheckpoints::reserved_bytes(job, 1000, 0, 1), 8000.0);
}

// A memory cgroup's limit (a Slurm job's --mem) counts, at the process's cgroup or above
// it, where it leaves less than MemAvailable: the check passed such runs, which the kernel
// then killed.
TEST(MemoryCheck, ReadsTheMemoryCgroupsLimit) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "ht_memory_cgroup";
  const auto put = [&](const fs::path& file, const std::string& text) {
    fs::create_directories((root / file).parent_path());
    std::ofstream(root / file) << text;
  };
  fs::remove_all(root);
  put("proc/meminfo", "MemTotal: 100000000 kB\nMemAvailable: 50000000 kB\n");
  EXPECT_EQ(available_memory(root.string()).node, int64_t{50000000} * 1024);  // no cgroup file
  // cgroup v2: the job's limit, 8 GiB with 3 GiB used, binds; the step below has none.
  put("proc/self/cgroup", "0::/slurm/job_7/step_0\n");
  put("sys/fs/cgroup/slurm/job_7/memory.max", "8589934592\n");
  put("sys/fs/cgroup/slurm/job_7/memory.current", "3221225472\n");
  put("sys/fs/cgroup/slurm/job_7/step_0/memory.max", "max\n");
  put("sys/fs/cgroup/slurm/job_7/step_0/memory.current", "1000\n");
  EXPECT_EQ(available_memory(root.string()).node, int64_t{5} << 30);
  EXPECT_EQ(available_memory(root.string()).process, -1);  // RLIMIT_AS: this process only
  // cgroup v1 beside the others' lines; "no limit" is a number near 2^63.
  put("proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n");
  put("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
  put("sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "1073741824\n");
  put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  put("sys/fs/cgroup/memory/memory.usage_in_bytes", "1\n");
  EXPECT_EQ(available_memory(root.string()).node, int64_t{1} << 30);
  fs::remove_all(root);
}

TEST(MemoryCheck, RefusesAModelTheGpuCannotHold) {
  const int64_t gib = int64_t{1} << 30;
  check_device_memory_fits("a.yaml", 6.0 * gib, 80 * gib, 4);  // 6 GiB of 20 per rank
  check_device_memory_fits("a.yaml", 1e15, -1, 1);             // host memory: not checked
  test::expect_usage_error(
      [&] { check_device_memory_fits("a.yaml", 30.0 * gib, 80 * gib, 4); },
      {"a.yaml: the model needs at least 30.0 GiB of GPU memory per rank",
       "its GPU has 80.0 GiB free for 4 rank(s)", "train.batch_size", "precision bf16"});
}

TEST(MemoryCheck, ReadsTheAvailableMemory) {
  EXPECT_GT(available_memory().node, 0);  // Linux: /proc/meminfo has MemAvailable
}

}  // namespace
}  // namespace hpctrain
