// Helpers shared by the checkpoint tests: a fresh temporary directory and a checkpoint
// state to write.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"
#include "core/random.hpp"

namespace hpctrain::checkpoint_test {

// An empty directory of its own under the test's temporary directory.
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/ht_ckpt_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The state of step `step` (ten steps an epoch, two ranks) with parameters and momentum of
// `n` values each, drawn from the step.
inline CheckpointState sample_state(int64_t step, size_t n = 1000) {
  CheckpointState s;
  s.step = step;
  s.epoch = step / 10;
  s.step_in_epoch = step % 10;
  s.steps_per_epoch = 10;
  s.global_batch = 128;
  s.world_size = 2;
  s.strategy = "allreduce";
  s.config_yaml = "run:\n  name: x\n";
  s.architecture = "input 1x2x2\nlayer d dense params=1000 out=10\n";
  s.created = "2026-01-01T00:00:00Z";
  Rng rng(static_cast<uint64_t>(step));
  for (const char* name : {kParamsArray, kVelocityArray}) {
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(rng.normal());
    s.arrays[name] = v;
  }
  return s;
}

}  // namespace hpctrain::checkpoint_test
