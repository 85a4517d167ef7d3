// Helpers shared by the config tests: YAML written to fresh temp files and the exact
// UsageError text a load produces.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "core/error.hpp"
#include "train/catalog.hpp"

namespace hpctrain::config_test {

namespace fs = std::filesystem;

// A model config of `layers` (preset "layers").
inline ModelConfig layer_list(std::vector<LayerSpec> layers) {
  ModelConfig mc;
  mc.preset = "layers";
  mc.layers = std::move(layers);
  return mc;
}

// The smallest valid config, and one that sets every scalar key to other than its default
// (but the keys that do not apply with its choices: those of Adam, of another schedule
// than step, and of another precision than fp16, which needs strategy allreduce).
inline constexpr const char* kMinimal = "data:\n  train: train.h5\n";
inline constexpr const char* kFull = R"(run:
  name: full
  dir: /scratch/full
  seed: 18446744073709551615
  deterministic: true
  threads: 3
device: cuda
precision: tf32
layout: nchw
data:
  train: a/train.h5
  val: a/val.h5
  test: a/test.h5
  prefetch_threads: 3
  prefetch_depth: 7
  shuffle: false
model:
  preset: mlp
  hidden:
    - 256
    - 128
optimizer:
  name: sgd
  lr: 1e-3
  momentum: 0.5
  nesterov: yes
  weight_decay: 0.0005
  schedule:
    type: step
    warmup_epochs: 0.5
    step_epochs: 10
    gamma: 0.5
train:
  epochs: 12
  batch_size: 128
  val_every: 2
  progress_seconds: 0
  step_timing: true
distributed:
  strategy: average
  algorithm: ring
  every: 4
  ring_chunk_bytes: 4294967296
)";

// A file under the gtest temp dir, unique per call so tests never see each other's files.
inline std::string write_yaml(const std::string& text) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::path(::testing::TempDir()) / "hpctrain_test_config";
  fs::create_directories(dir);
  const fs::path file =
      dir / ("config_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".yaml");
  std::ofstream(file) << text;
  return file.string();
}

// The UsageError message of loading `text` with `overrides`; fails the test if it loads.
inline std::string load_error(const std::string& text, const std::vector<std::string>& overrides,
                              std::string* path_out = nullptr) {
  const std::string path = write_yaml(text);
  if (path_out) *path_out = path;
  try {
    load_config(path, overrides, catalog());
  } catch (const UsageError& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  ADD_FAILURE() << "expected a UsageError for:\n" << text;
  return "";
}

// `expected` with FILE standing for the path the text was written to.
inline void expect_error(const std::string& text, const std::string& expected,
                         const std::vector<std::string>& overrides = {}) {
  std::string path;
  const std::string message = load_error(text, overrides, &path);
  std::string want = expected;
  if (want.rfind("FILE", 0) == 0) want = path + want.substr(4);
  EXPECT_EQ(message, want) << "for:\n" << text;
}

}  // namespace hpctrain::config_test
