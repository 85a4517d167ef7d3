// The start-up memory check (train/memory_check): the estimate's arithmetic, and a run
// that does not fit is refused with one line naming what to change.
#include <gtest/gtest.h>

#include "common/usage_error.hpp"
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
  check_memory_fits("a.yaml", need, true, 16 * gib, 2);  // 7 GiB of 8 per rank
  check_memory_fits("a.yaml", need, false, 3 * gib, 2);  // on a GPU: data only, 1 of 1.5
  check_memory_fits("a.yaml", need, true, -1, 1);        // unknown: not checked
  test::expect_usage_error(
      [&] { check_memory_fits("a.yaml", need, true, 12 * gib, 2); },
      {"a.yaml: this run needs at least 7.0 GiB of memory per rank", "model 6.0 GiB",
       "data 1.0 GiB", "12.0 GiB available for its 2", "train.batch_size", "data.cache_mb"});
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
  EXPECT_GT(available_memory_bytes(), 0);  // Linux: /proc/meminfo has MemAvailable
}

}  // namespace
}  // namespace hpctrain
