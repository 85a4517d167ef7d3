// Tests of the config loader: valid files, defaults, --set overrides, every class of error
// message (with its line number and suggestion), and the config_to_yaml round trip.
// Each test writes its YAML into a fresh file under the gtest temp directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/config_schema.hpp"
#include "config_test_helpers.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

using config_test::expect_error;
using config_test::load_error;
using config_test::write_yaml;

namespace fs = std::filesystem;

const char* const kMinimal = "data:\n  train: train.h5\n";

const char* const kFull = R"(run:
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
    min_lr: 0.0001
train:
  epochs: 12
  batch_size: 128
  val_every: 2
  progress_seconds: 0
  step_timing: true
  loss_scale:
    initial: 1024
    growth_interval: 50
distributed:
  strategy: average
  algorithm: mpi
  every: 4
  ring_chunk_bytes: 4294967296
  bucket_bytes: 1048576
)";

TEST(ConfigLoad, FullFileSetsEveryField) {
  const std::string path = write_yaml(kFull);
  const Config c = load_config(path, {});
  EXPECT_EQ(c.source_file, path);
  EXPECT_EQ(c.run.name, "full");
  EXPECT_EQ(c.run.dir, "/scratch/full");
  EXPECT_EQ(c.run.seed, 18446744073709551615ULL);
  EXPECT_TRUE(c.run.deterministic);
  EXPECT_EQ(c.run.threads, 3);
  EXPECT_EQ(c.device, Device::kCuda);
  EXPECT_EQ(c.precision, Precision::kTf32);
  EXPECT_EQ(c.layout, Layout::kNchw);
  EXPECT_EQ(c.data.train, "a/train.h5");
  EXPECT_EQ(c.data.val, "a/val.h5");
  EXPECT_EQ(c.data.test, "a/test.h5");
  EXPECT_EQ(c.data.prefetch_threads, 3);
  EXPECT_EQ(c.data.prefetch_depth, 7);
  EXPECT_FALSE(c.data.shuffle);
  EXPECT_EQ(c.model.preset, "mlp");
  EXPECT_EQ(c.model.hidden, (std::vector<int>{256, 128}));
  EXPECT_TRUE(c.model.layers.empty());
  EXPECT_EQ(c.optimizer.name, "sgd");
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, 0.5);
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.0005);
  EXPECT_EQ(c.optimizer.schedule.type, ScheduleType::kStep);
  EXPECT_DOUBLE_EQ(c.optimizer.schedule.warmup_epochs, 0.5);
  EXPECT_EQ(c.optimizer.schedule.step_epochs, 10);
  EXPECT_DOUBLE_EQ(c.optimizer.schedule.gamma, 0.5);
  EXPECT_DOUBLE_EQ(c.optimizer.schedule.min_lr, 0.0001);
  EXPECT_EQ(c.train.epochs, 12);
  EXPECT_EQ(c.train.batch_size, 128);
  EXPECT_EQ(c.train.val_every, 2);
  EXPECT_DOUBLE_EQ(c.train.progress_seconds, 0.0);
  EXPECT_TRUE(c.train.step_timing);
  EXPECT_EQ(c.train.loss_scale.initial, 1024.0);
  EXPECT_EQ(c.train.loss_scale.growth_interval, 50);
  EXPECT_EQ(c.distributed.strategy, Strategy::kAverage);
  EXPECT_EQ(c.distributed.algorithm, AllreduceAlgorithm::kMpi);
  EXPECT_EQ(c.distributed.every, 4);
  EXPECT_EQ(c.distributed.ring_chunk_bytes, int64_t{4294967296});
  EXPECT_EQ(c.distributed.bucket_bytes, 1048576);
}

TEST(ConfigLoad, MinimalFileTakesDefaults) {
  const Config c = load_config(write_yaml(kMinimal), {});
  const Config d;  // the defaults of config.hpp
  EXPECT_EQ(c.run.name, "run");
  EXPECT_EQ(c.run.dir, "runs/run");
  EXPECT_EQ(c.run.seed, d.run.seed);
  EXPECT_EQ(c.run.deterministic, d.run.deterministic);
  EXPECT_EQ(c.run.threads, d.run.threads);
  EXPECT_EQ(c.device, Device::kAuto);
  EXPECT_EQ(c.precision, Precision::kFp32);
  EXPECT_EQ(c.layout, Layout::kAuto);
  EXPECT_FALSE(c.train.step_timing);
  EXPECT_EQ(c.train.loss_scale.initial, 65536.0);
  EXPECT_EQ(c.train.loss_scale.growth_interval, 2000);
  EXPECT_EQ(c.data.train, "train.h5");
  EXPECT_EQ(c.data.val, "");
  EXPECT_EQ(c.data.test, "");
  EXPECT_EQ(c.data.prefetch_threads, d.data.prefetch_threads);
  EXPECT_EQ(c.data.prefetch_depth, d.data.prefetch_depth);
  EXPECT_EQ(c.data.shuffle, d.data.shuffle);
  EXPECT_EQ(c.model.preset, "mlp");
  EXPECT_EQ(c.model.hidden, std::vector<int>{192});
  EXPECT_EQ(c.optimizer.name, "sgd");
  EXPECT_DOUBLE_EQ(c.optimizer.lr, d.optimizer.lr);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, d.optimizer.momentum);
  EXPECT_FALSE(c.optimizer.nesterov);
  EXPECT_EQ(c.optimizer.schedule.type, ScheduleType::kConstant);
  EXPECT_EQ(c.optimizer.schedule.step_epochs, d.optimizer.schedule.step_epochs);
  EXPECT_EQ(c.train.epochs, d.train.epochs);
  EXPECT_EQ(c.train.batch_size, d.train.batch_size);
  EXPECT_EQ(c.distributed.strategy, Strategy::kAllreduce);
  EXPECT_EQ(c.distributed.algorithm, AllreduceAlgorithm::kAuto);
  EXPECT_EQ(c.distributed.every, d.distributed.every);
  EXPECT_EQ(c.distributed.ring_chunk_bytes, d.distributed.ring_chunk_bytes);
}

TEST(ConfigLoad, RunDirDefaultsToRunsSlashName) {
  const Config c = load_config(write_yaml("run:\n  name: exp7\ndata:\n  train: t.h5\n"), {});
  EXPECT_EQ(c.run.dir, "runs/exp7");
}

TEST(ConfigLoad, EmptySectionsAndOptionalPathsAreAccepted) {
  const Config c = load_config(write_yaml("run:\ntrain:\ndata:\n  train: t.h5\n  val:\n"), {});
  EXPECT_EQ(c.data.val, "");
  EXPECT_EQ(c.train.epochs, TrainConfig{}.epochs);
}

TEST(ConfigLoad, LayersPresetResolvesNamesAndClearsHidden) {
  const Config c = load_config(write_yaml(R"(data: {train: t.h5}
model:
  preset: layers
  layers:
    - {type: dense, units: 300}
    - {type: relu}
    - {type: dense, name: bottleneck, units: 30}
)"),
                               {});
  ASSERT_EQ(c.model.layers.size(), 3u);
  EXPECT_EQ(c.model.layers[0].type, "dense");
  EXPECT_EQ(c.model.layers[0].name, "dense0");
  EXPECT_EQ(c.model.layers[0].units, 300);
  EXPECT_EQ(c.model.layers[1].type, "relu");
  EXPECT_EQ(c.model.layers[1].name, "relu1");
  EXPECT_EQ(c.model.layers[2].name, "bottleneck");
  EXPECT_EQ(c.model.layers[2].units, 30);
  EXPECT_TRUE(c.model.hidden.empty());
}

TEST(ConfigLoad, ShippedFashionMnistConfigIsValid) {
  const fs::path file =
      fs::path(__FILE__).parent_path() / ".." / ".." / "configs" / "fashion_mnist_mlp.yaml";
  const Config c = load_config(file.string(), {});
  EXPECT_EQ(c.run.name, "fashion_mnist_mlp");
  EXPECT_EQ(c.run.seed, 1u);
  EXPECT_EQ(c.data.train, "data/fashion-mnist/train.h5");
  EXPECT_EQ(c.data.val, "data/fashion-mnist/val.h5");
  EXPECT_EQ(c.data.test, "data/fashion-mnist/test.h5");
  EXPECT_EQ(c.model.preset, "mlp");
  EXPECT_EQ(c.model.hidden, std::vector<int>{192});
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.05);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, 0.9);
  EXPECT_EQ(c.train.epochs, 5);
  EXPECT_EQ(c.train.batch_size, 64);
  EXPECT_EQ(c.distributed.strategy, Strategy::kAllreduce);
  EXPECT_EQ(c.distributed.algorithm, AllreduceAlgorithm::kAuto);
}

TEST(ConfigOverride, ScalarsReplaceFileValues) {
  const Config c = load_config(write_yaml(kFull),
                               {"train.epochs=3", "optimizer.lr=0.25", "run.deterministic=false",
                                "device=cpu", "run.name=renamed", "distributed.every=16"});
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.25);
  EXPECT_FALSE(c.run.deterministic);
  EXPECT_EQ(c.device, Device::kCpu);
  EXPECT_EQ(c.run.name, "renamed");
  EXPECT_EQ(c.run.dir, "/scratch/full");  // given explicitly, so not derived from the name
  EXPECT_EQ(c.distributed.every, 16);
  EXPECT_EQ(c.train.batch_size, 128);  // untouched keys keep the file's values
}

TEST(ConfigOverride, ListsAndNewSections) {
  const Config c =
      load_config(write_yaml(kMinimal), {"model.hidden=[64, 32]", "optimizer.schedule.type=cosine",
                                         "optimizer.schedule.min_lr=0.001"});
  EXPECT_EQ(c.model.hidden, (std::vector<int>{64, 32}));
  EXPECT_EQ(c.optimizer.schedule.type, ScheduleType::kCosine);
  EXPECT_DOUBLE_EQ(c.optimizer.schedule.min_lr, 0.001);
  EXPECT_EQ(c.run.dir, "runs/run");
}

TEST(ConfigOverride, LaterOverrideWinsAndValueMayContainEquals) {
  const Config c =
      load_config(write_yaml(kMinimal), {"train.epochs=2", "train.epochs=9", "run.name=a=b"});
  EXPECT_EQ(c.train.epochs, 9);
  EXPECT_EQ(c.run.name, "a=b");
}

TEST(ConfigOverride, ReplacesLayerList) {
  const Config c = load_config(
      write_yaml(kMinimal),
      {"model.preset=layers", "model.layers=[{type: dense, units: 10}, {type: relu, name: act}]"});
  ASSERT_EQ(c.model.layers.size(), 2u);
  EXPECT_EQ(c.model.layers[0].units, 10);
  EXPECT_EQ(c.model.layers[1].name, "act");
}

TEST(ConfigOverride, EmptyValueClearsAnOptionalPath) {
  const Config c =
      load_config(write_yaml("data:\n  train: t.h5\n  val: v.h5\n"), {"data.val=", "run.dir="});
  EXPECT_EQ(c.data.val, "");
  EXPECT_EQ(c.run.dir, "runs/run");
}

TEST(ConfigErrors, UnknownKeySuggestsCloseKey) {
  expect_error("data:\n  train: t.h5\noptimizer:\n  lr: 0.1\n  momentun: 0.9\n",
               "FILE:5: optimizer.momentun: unknown key (did you mean 'momentum'?)");
  expect_error("optimiser:\n  lr: 0.1\n",
               "FILE:1: optimiser: unknown key (did you mean 'optimizer'?)");
  expect_error("data:\n  train: t.h5\ntrain:\n  batchsize: 3\n",
               "FILE:4: train.batchsize: unknown key (did you mean 'batch_size'?)");
  expect_error("data:\n  train: t.h5\noptimizer:\n  schedule:\n    gama: 0.5\n",
               "FILE:5: optimizer.schedule.gama: unknown key (did you mean 'gamma'?)");
}

TEST(ConfigErrors, UnknownKeyInWrongSectionSuggestsFullPath) {
  expect_error("data:\n  train: t.h5\ntrain:\n  lr: 0.1\n",
               "FILE:4: train.lr: unknown key (did you mean 'optimizer.lr'?)");
}

TEST(ConfigErrors, UnknownKeyWithoutCloseMatchHasNoSuggestion) {
  expect_error("data:\n  train: t.h5\ntrain:\n  zzzz: 1\n", "FILE:4: train.zzzz: unknown key");
  expect_error("data:\n  train: t.h5\noptimizer:\n  x: 1\n", "FILE:4: optimizer.x: unknown key");
}

TEST(ConfigErrors, WrongTypes) {
  const std::string head = "data:\n  train: t.h5\n";
  expect_error(head + "train:\n  epochs: abc\n",
               "FILE:4: train.epochs: expected an integer, got 'abc'");
  expect_error(head + "train:\n  epochs: 0.5\n",
               "FILE:4: train.epochs: expected an integer, got '0.5'");
  expect_error(head + "train:\n  epochs: 1e3\n",
               "FILE:4: train.epochs: expected an integer, got '1e3'");
  expect_error(head + "train:\n  epochs:\n",
               "FILE:4: train.epochs: expected an integer, got nothing");
  expect_error(head + "train:\n  epochs: [1]\n",
               "FILE:4: train.epochs: expected an integer, got a list");
  expect_error(head + "optimizer:\n  lr: fast\n",
               "FILE:4: optimizer.lr: expected a finite number, got 'fast'");
  expect_error(head + "optimizer:\n  lr: .inf\n",
               "FILE:4: optimizer.lr: expected a finite number, got '.inf'");
  expect_error(head + "run:\n  deterministic: maybe\n",
               "FILE:4: run.deterministic: expected true or false, got 'maybe'");
  expect_error(head + "run:\n  name: {a: 1}\n", "FILE:4: run.name: expected a string, got a map");
  expect_error(head + "model:\n  hidden: 64\n",
               "FILE:4: model.hidden: expected a list of integers, got '64'");
  expect_error(head + "run: 5\n", "FILE:3: run: expected a map of keys, got '5'");
}

TEST(ConfigErrors, OutOfRange) {
  const std::string head = "data:\n  train: t.h5\n";
  expect_error(head + "train:\n  batch_size: 0\n",
               "FILE:4: train.batch_size: expected an integer >= 1, got 0");
  expect_error(head + "train:\n  epochs: 3000000000\n",
               "FILE:4: train.epochs: expected an integer <= 2147483647, got 3000000000");
  expect_error(head + "train:\n  epochs: 99999999999999999999999\n",
               "FILE:4: train.epochs: expected an integer <= 2147483647, got "
               "99999999999999999999999");
  expect_error(head + "run:\n  threads: -1\n",
               "FILE:4: run.threads: expected an integer >= 0, got -1");
  expect_error(head + "run:\n  seed: -1\n", "FILE:4: run.seed: expected an integer >= 0, got -1");
  expect_error(head + "run:\n  seed: 18446744073709551616\n",
               "FILE:4: run.seed: expected an integer <= 18446744073709551615, got "
               "18446744073709551616");
  expect_error(head + "optimizer:\n  lr: 0\n",
               "FILE:4: optimizer.lr: expected a number > 0, got 0");
  expect_error(head + "optimizer:\n  momentum: 1.0\n",
               "FILE:4: optimizer.momentum: expected a number >= 0 and < 1, got 1.0");
  expect_error(head + "optimizer:\n  weight_decay: -0.1\n",
               "FILE:4: optimizer.weight_decay: expected a number >= 0, got -0.1");
  expect_error(head + "optimizer:\n  schedule:\n    gamma: 0\n",
               "FILE:5: optimizer.schedule.gamma: expected a number > 0 and <= 1, got 0");
  expect_error(head + "optimizer:\n  schedule:\n    gamma: 1.5\n",
               "FILE:5: optimizer.schedule.gamma: expected a number > 0 and <= 1, got 1.5");
  expect_error(head + "optimizer:\n  schedule:\n    step_epochs: 0\n",
               "FILE:5: optimizer.schedule.step_epochs: expected an integer >= 1, got 0");
  expect_error(head + "optimizer:\n  schedule:\n    warmup_epochs: -1\n",
               "FILE:5: optimizer.schedule.warmup_epochs: expected a number >= 0, got -1");
  expect_error(head + "distributed:\n  ring_chunk_bytes: 32\n",
               "FILE:4: distributed.ring_chunk_bytes: expected an integer >= 64, got 32");
  expect_error(head + "distributed:\n  bucket_bytes: 100\n",
               "FILE:4: distributed.bucket_bytes: expected an integer >= 1024, got 100");
  expect_error(head + "distributed:\n  every: 0\n",
               "FILE:4: distributed.every: expected an integer >= 1, got 0");
  expect_error(head + "train:\n  progress_seconds: -2\n",
               "FILE:4: train.progress_seconds: expected a number >= 0, got -2");
  expect_error("data:\n  train: t.h5\n  prefetch_threads: 0\n",
               "FILE:3: data.prefetch_threads: expected an integer >= 1, got 0");
}

TEST(ConfigErrors, ListElementsReportTheirOwnLine) {
  expect_error("data:\n  train: t.h5\nmodel:\n  hidden:\n    - 64\n    - 0\n",
               "FILE:6: model.hidden[1]: expected an integer >= 1, got 0");
  expect_error("data:\n  train: t.h5\nmodel:\n  hidden: [64, 2.5]\n",
               "FILE:4: model.hidden[1]: expected an integer, got '2.5'");
}

TEST(ConfigErrors, BadEnumValues) {
  const std::string head = "data:\n  train: t.h5\n";
  expect_error(head + "distributed:\n  strategy: foo\n",
               "FILE:4: distributed.strategy: expected one of allreduce, average, got 'foo'");
  expect_error(head + "distributed:\n  algorithm: gloo\n",
               "FILE:4: distributed.algorithm: expected one of auto, ring, mpi, nccl, got 'gloo'");
  expect_error(head + "device: gpu\n",
               "FILE:3: device: expected one of auto, cpu, cuda, got 'gpu'");
  expect_error(head + "precision: fp8\n",
               "FILE:3: precision: expected one of fp32, tf32, bf16, fp16, got 'fp8'");
  expect_error(head + "precision: fp16\ndistributed:\n  strategy: average\n",
               "FILE:3: precision: fp16 needs distributed.strategy allreduce (its ranks must agree "
               "on the loss scale); bf16 needs no loss scale and works with average");
  expect_error(head + "layout: nhwc\n",
               "FILE:3: layout: nhwc needs precision bf16 or fp16 (float32 runs are NCHW)");
  expect_error(head + "precision: bf16\nlayout: nhwc\ndevice: cpu\n",
               "FILE:4: layout: nhwc needs a GPU (device cuda or auto); the CPU is NCHW");
  expect_error(head + "layout: chwn\n",
               "FILE:3: layout: expected one of auto, nchw, nhwc, got 'chwn'");
  EXPECT_EQ(load_config(write_yaml(head + "precision: fp16\nlayout: nhwc\n"), {}).layout,
            Layout::kNhwc);
  expect_error(head + "optimizer:\n  schedule:\n    type: linear\n",
               "FILE:5: optimizer.schedule.type: expected one of constant, step, cosine, got "
               "'linear'");
  expect_error(head + "optimizer:\n  name: lamb\n",
               "FILE:4: optimizer.name: expected one of sgd, adam, adamw, got 'lamb'");
  expect_error(head + "model:\n  preset: resnet\n",
               "FILE:4: model.preset: expected one of mlp, cnn, resnet18, resnet34, layers, got "
               "'resnet'");
  expect_error(head + "model:\n  preset: resnet18\n  stem: tiny\n",
               "FILE:5: model.stem: expected one of auto, imagenet, small, got 'tiny'");
}

TEST(ConfigErrors, RequiredTrainData) {
  expect_error("train:\n  epochs: 2\n", "FILE: data.train: required key is missing");
  expect_error("data:\n  val: v.h5\n", "FILE: data.train: required key is missing");
  expect_error("data:\n  train: ''\n", "FILE:2: data.train: expected a non-empty string, got ''");
  expect_error("run:\n  name: ''\ndata:\n  train: t.h5\n",
               "FILE:2: run.name: expected a non-empty string, got ''");
}

TEST(ConfigErrors, ModelLayers) {
  const std::string head = "data:\n  train: t.h5\nmodel:\n";
  expect_error(head + "  preset: layers\n",
               "FILE: model.layers: required key is missing when model.preset is 'layers'");
  expect_error(head + "  preset: layers\n  layers: []\n",
               "FILE:5: model.layers: expected a non-empty list of layers, got an empty one");
  expect_error(head + "  preset: layers\n  layers:\n    - units: 3\n",
               "FILE:6: model.layers[0].type: required key is missing (one of dense, relu, "
               "conv2d, maxpool, avgpool, global_avgpool, flatten, batchnorm, dropout, "
               "basic_block)");
  expect_error(head + "  preset: layers\n  layers:\n    - type: relu\n    - type: dense\n",
               "FILE:7: model.layers[1].units: required key is missing for a dense layer");
  expect_error(head + "  preset: layers\n  layers:\n    - type: dense\n      units: 0\n",
               "FILE:7: model.layers[0].units: expected an integer >= 1, got 0");
  expect_error(head + "  preset: layers\n  layers:\n    - {type: relu, units: 3}\n",
               "FILE:6: model.layers[0].units: only dense layers take units");
  expect_error(head + "  preset: layers\n  layers:\n    - {type: dense, unit: 3}\n",
               "FILE:6: model.layers[0].unit: unknown key (did you mean 'units'?)");
  expect_error(head + "  preset: layers\n  layers:\n    - {type: conv}\n",
               "FILE:6: model.layers[0].type: expected one of dense, relu, conv2d, maxpool, "
               "avgpool, global_avgpool, flatten, batchnorm, dropout, basic_block, got 'conv'");
  expect_error(head +
                   "  preset: layers\n  layers:\n    - {type: relu, name: a}\n"
                   "    - {type: relu, name: a}\n",
               "FILE:7: model.layers[1].name: duplicate layer name 'a' (also model.layers[0])");
  expect_error(head + "  preset: layers\n  layers: 5\n",
               "FILE:5: model.layers: expected a list of layers, got '5'");
  expect_error(head + "  preset: layers\n  hidden: [10]\n  layers: [{type: relu}]\n",
               "FILE:5: model.hidden: only used with model.preset 'mlp' (preset is 'layers')");
  expect_error(head + "  layers: [{type: relu}]\n",
               "FILE:4: model.layers: only used with model.preset 'layers' (preset is 'mlp')");
}

TEST(ConfigErrors, CrossFieldChecks) {
  const std::string head = "data:\n  train: t.h5\noptimizer:\n";
  expect_error(head + "  momentum: 0\n  nesterov: true\n",
               "FILE:5: optimizer.nesterov: requires optimizer.momentum > 0");
  expect_error(head + "  lr: 0.01\n  schedule: {type: cosine, min_lr: 0.1}\n",
               "FILE:5: optimizer.schedule.min_lr: expected a number <= optimizer.lr (0.01), "
               "got 0.1");
}

TEST(ConfigErrors, KeysOfAnotherOptimizer) {
  const std::string head = "data:\n  train: t.h5\noptimizer:\n";
  expect_error(head + "  name: adam\n  momentum: 0.5\n",
               "FILE:5: optimizer.momentum: only used with optimizer.name 'sgd' (name is 'adam')");
  expect_error(head + "  name: adamw\n  nesterov: true\n",
               "FILE:5: optimizer.nesterov: only used with optimizer.name 'sgd' (name is 'adamw')");
  expect_error(head + "  beta2: 0.99\n",
               "FILE:4: optimizer.beta2: only used with optimizer.name 'adam' or 'adamw' (name is "
               "'sgd')");
  expect_error(head + "  name: adam\n  beta1: 1\n",
               "FILE:5: optimizer.beta1: expected a number >= 0 and < 1, got 1");
  expect_error(head + "  name: adam\n  eps: 0\n",
               "FILE:5: optimizer.eps: expected a number > 0, got 0");
  // A file written for SGD switches with --set: its momentum is SGD's default.
  const Config c = load_config(write_yaml(head + "  momentum: 0.9\n"), {"optimizer.name=adam"});
  EXPECT_EQ(c.optimizer.name, "adam");
}

TEST(ConfigErrors, DuplicateKey) {
  expect_error("data:\n  train: t.h5\ntrain:\n  epochs: 2\n  epochs: 3\n",
               "FILE:5: train.epochs: duplicate key (first given at line 4)");
  expect_error("data:\n  train: t.h5\ndata:\n  prefetch_depth: 0\n",
               "FILE:3: data: duplicate key (first given at line 1)");
}

TEST(ConfigErrors, FileLevelProblems) {
  // yaml-cpp words the syntax message; the location and prefix are ours.
  std::string path;
  const std::string syntax = load_error("data:\n  train: t.h5\n  val: [v.h5\nx: 1\n", {}, &path);
  EXPECT_EQ(syntax.rfind(path + ":4: YAML syntax error: ", 0), 0u) << syntax;

  const std::string empty = load_error("", {}, &path);
  EXPECT_EQ(empty.rfind(path + ": config file is empty", 0), 0u) << empty;
  const std::string comments = load_error("# nothing here\n", {}, &path);
  EXPECT_EQ(comments.rfind(path + ": config file is empty", 0), 0u) << comments;
  expect_error("- a\n- b\n", "FILE:1: expected a map of sections at the top level, got a list");

  const std::string missing = (fs::path(::testing::TempDir()) / "no_such_config.yaml").string();
  try {
    load_config(missing, {});
    ADD_FAILURE() << "loaded a missing file";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot open config file");
  }
  EXPECT_THROW(load_config(::testing::TempDir(), {}), UsageError);
}

TEST(ConfigOverrideErrors, MalformedOverride) {
  expect_error(kMinimal, "--set train.epochs: expected key.path=value", {"train.epochs"});
  expect_error(kMinimal, "--set =3: expected key.path=value", {"=3"});
  expect_error(kMinimal, "--set train..epochs=3: expected key.path=value", {"train..epochs=3"});
}

TEST(ConfigOverrideErrors, UnknownPath) {
  expect_error(kMinimal, "--set optimizer.momentun: unknown key (did you mean 'momentum'?)",
               {"optimizer.momentun=0.5"});
  expect_error(kMinimal, "--set foo: unknown key", {"foo.bar=1"});
  expect_error(kMinimal,
               "--set optimizer.lr.x: unknown key ('optimizer.lr' holds a value, not keys)",
               {"optimizer.lr.x=1"});
  expect_error(kMinimal,
               "--set model.layers.units: unknown key ('model.layers' holds a value, not keys)",
               {"model.layers.units=3"});
}

TEST(ConfigOverrideErrors, BadValuesAreReportedAtSet) {
  expect_error(kFull, "--set train.epochs: expected an integer, got 'x'", {"train.epochs=x"});
  expect_error(kMinimal, "--set train.batch_size: expected an integer >= 1, got 0",
               {"train.batch_size=0"});
  expect_error(kMinimal, "--set model.hidden[1]: expected an integer >= 1, got 0",
               {"model.hidden=[64,0]"});
  expect_error(kMinimal,
               "--set distributed.strategy: expected one of allreduce, average, got 'foo'",
               {"distributed.strategy=foo"});
  expect_error(kMinimal, "--set optimizer.schedule.gama: unknown key (did you mean 'gamma'?)",
               {"optimizer.schedule={type: step, gama: 0.5}"});
  expect_error(kMinimal, "--set data.train: expected a non-empty string, got ''", {"data.train="});
  const std::string syntax = load_error(kMinimal, {"model.hidden=[1,2"});
  EXPECT_EQ(syntax.rfind("--set model.hidden: YAML syntax error in value: ", 0), 0u) << syntax;
}

TEST(ConfigOverrideErrors, FileErrorsStillNameTheFileLine) {
  // Overrides elsewhere must not move the location of an error that is in the file.
  expect_error("data:\n  train: t.h5\ntrain:\n  epochs: abc\n",
               "FILE:4: train.epochs: expected an integer, got 'abc'", {"train.batch_size=8"});
  // And an override that fixes the bad value makes the file load.
  const Config c =
      load_config(write_yaml("data:\n  train: t.h5\ntrain:\n  epochs: abc\n"), {"train.epochs=4"});
  EXPECT_EQ(c.train.epochs, 4);
}

TEST(ConfigOverrideErrors, OverrideBelowAScalarSection) {
  expect_error("data:\n  train: t.h5\ntrain: 5\n", "FILE:3: train: expected a map of keys, got '5'",
               {"train.epochs=3"});
}

void expect_same_config(const Config& a, const Config& b) {
  EXPECT_EQ(a.run.name, b.run.name);
  EXPECT_EQ(a.run.dir, b.run.dir);
  EXPECT_EQ(a.run.seed, b.run.seed);
  EXPECT_EQ(a.run.deterministic, b.run.deterministic);
  EXPECT_EQ(a.run.threads, b.run.threads);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.data.train, b.data.train);
  EXPECT_EQ(a.data.val, b.data.val);
  EXPECT_EQ(a.data.test, b.data.test);
  EXPECT_EQ(a.data.prefetch_threads, b.data.prefetch_threads);
  EXPECT_EQ(a.data.prefetch_depth, b.data.prefetch_depth);
  EXPECT_EQ(a.data.shuffle, b.data.shuffle);
  EXPECT_EQ(a.model.preset, b.model.preset);
  EXPECT_EQ(a.model.hidden, b.model.hidden);
  ASSERT_EQ(a.model.layers.size(), b.model.layers.size());
  for (std::size_t i = 0; i < a.model.layers.size(); ++i) {
    EXPECT_EQ(a.model.layers[i].type, b.model.layers[i].type);
    EXPECT_EQ(a.model.layers[i].name, b.model.layers[i].name);
    EXPECT_EQ(a.model.layers[i].units, b.model.layers[i].units);
    EXPECT_EQ(a.model.layers[i].filters, b.model.layers[i].filters);
    EXPECT_EQ(a.model.layers[i].kernel, b.model.layers[i].kernel);
    EXPECT_EQ(a.model.layers[i].stride, b.model.layers[i].stride);
    EXPECT_EQ(a.model.layers[i].padding, b.model.layers[i].padding);
    EXPECT_EQ(a.model.layers[i].bias, b.model.layers[i].bias);
  }
  // Exact equality on purpose: the emitter must write numbers that read back bit for bit.
  EXPECT_EQ(a.optimizer.name, b.optimizer.name);
  EXPECT_EQ(a.optimizer.lr, b.optimizer.lr);
  EXPECT_EQ(a.optimizer.momentum, b.optimizer.momentum);
  EXPECT_EQ(a.optimizer.nesterov, b.optimizer.nesterov);
  EXPECT_EQ(a.optimizer.weight_decay, b.optimizer.weight_decay);
  EXPECT_EQ(a.optimizer.schedule.type, b.optimizer.schedule.type);
  EXPECT_EQ(a.optimizer.schedule.warmup_epochs, b.optimizer.schedule.warmup_epochs);
  EXPECT_EQ(a.optimizer.schedule.step_epochs, b.optimizer.schedule.step_epochs);
  EXPECT_EQ(a.optimizer.schedule.gamma, b.optimizer.schedule.gamma);
  EXPECT_EQ(a.optimizer.schedule.min_lr, b.optimizer.schedule.min_lr);
  EXPECT_EQ(a.train.epochs, b.train.epochs);
  EXPECT_EQ(a.train.batch_size, b.train.batch_size);
  EXPECT_EQ(a.train.val_every, b.train.val_every);
  EXPECT_EQ(a.train.progress_seconds, b.train.progress_seconds);
  EXPECT_EQ(a.train.step_timing, b.train.step_timing);
  EXPECT_EQ(a.train.loss_scale.initial, b.train.loss_scale.initial);
  EXPECT_EQ(a.train.loss_scale.growth_interval, b.train.loss_scale.growth_interval);
  EXPECT_EQ(a.distributed.strategy, b.distributed.strategy);
  EXPECT_EQ(a.distributed.algorithm, b.distributed.algorithm);
  EXPECT_EQ(a.distributed.every, b.distributed.every);
  EXPECT_EQ(a.distributed.ring_chunk_bytes, b.distributed.ring_chunk_bytes);
  EXPECT_EQ(a.distributed.bucket_bytes, b.distributed.bucket_bytes);
  EXPECT_EQ(a.distributed.timeout_seconds, b.distributed.timeout_seconds);
  EXPECT_EQ(a.model.init_from, b.model.init_from);
  EXPECT_EQ(a.model.freeze, b.model.freeze);
  EXPECT_EQ(a.checkpoint.dir, b.checkpoint.dir);
  EXPECT_EQ(a.checkpoint.every_steps, b.checkpoint.every_steps);
  EXPECT_EQ(a.checkpoint.every_seconds, b.checkpoint.every_seconds);
  EXPECT_EQ(a.checkpoint.at_epoch_end, b.checkpoint.at_epoch_end);
  EXPECT_EQ(a.checkpoint.keep, b.checkpoint.keep);
}

// Emits `a`, loads the text back, and checks the result equals `a` and re-emits identically.
void expect_round_trip(const Config& a) {
  const std::string yaml = config_to_yaml(a);
  const std::string path = write_yaml(yaml);
  const Config b = load_config(path, {});
  SCOPED_TRACE(yaml);
  expect_same_config(a, b);
  Config b_same_source = b;
  b_same_source.source_file = a.source_file;
  EXPECT_EQ(config_to_yaml(b_same_source), yaml);
}

TEST(ConfigCheckpoint, DefaultsAndOverrides) {
  const Config d = load_config(write_yaml(kMinimal), {});
  EXPECT_EQ(d.checkpoint.dir, "runs/run/checkpoints");
  EXPECT_EQ(d.checkpoint.every_steps, 0);
  EXPECT_EQ(d.checkpoint.keep, 3);
  const Config c =
      load_config(write_yaml(kMinimal),
                  {"checkpoint.every_steps=50", "checkpoint.every_seconds=1.5", "checkpoint.keep=2",
                   "checkpoint.at_epoch_end=true", "model.init_from=a/ckpt.h5",
                   "model.freeze=[dense0]", "distributed.timeout_seconds=30"});
  EXPECT_EQ(c.checkpoint.every_steps, 50);
  EXPECT_EQ(c.checkpoint.every_seconds, 1.5);
  EXPECT_EQ(c.checkpoint.keep, 2);
  EXPECT_TRUE(c.checkpoint.at_epoch_end);
  EXPECT_EQ(c.model.init_from, "a/ckpt.h5");
  EXPECT_EQ(c.model.freeze, std::vector<std::string>{"dense0"});
  EXPECT_EQ(c.distributed.timeout_seconds, 30.0);
  expect_round_trip(c);
  EXPECT_THROW(load_config(write_yaml(kMinimal), {"checkpoint.keep=0"}), UsageError);
  EXPECT_THROW(load_config(write_yaml(kMinimal), {"checkpoint.every_stepz=3"}), UsageError);
}

TEST(ConfigToYaml, RoundTripsFullAndDefaultConfigs) {
  expect_round_trip(load_config(write_yaml(kFull), {}));
  expect_round_trip(load_config(write_yaml(kMinimal), {}));
}

TEST(ConfigToYaml, RoundTripsLayersAndAwkwardValues) {
  const Config c = load_config(
      write_yaml(kMinimal),
      {"model.preset=layers", "model.layers=[{type: dense, units: 7}, {type: relu, name: 'a: #b'}]",
       "run.name='true'", "data.val='null'", "optimizer.lr=0.1", "optimizer.momentum=0.3",
       "optimizer.weight_decay=1e-300", "train.progress_seconds=0.30000000000000004",
       "optimizer.schedule.gamma=0.3333333333333333", "run.seed=0"});
  EXPECT_EQ(c.run.name, "true");
  EXPECT_EQ(c.data.val, "null");
  EXPECT_EQ(c.model.layers[1].name, "a: #b");
  expect_round_trip(c);
}

TEST(ConfigToYaml, AdamKeysRoundTrip) {
  const Config c = load_config(
      write_yaml("data:\n  train: t.h5\noptimizer:\n  name: adamw\n  lr: 0.001\n  beta1: 0.8\n"
                 "  beta2: 0.99\n  eps: 1e-6\n  weight_decay: 0.05\n"),
      {});
  EXPECT_EQ(c.optimizer.name, "adamw");
  EXPECT_EQ(c.optimizer.beta1, 0.8);
  EXPECT_EQ(c.optimizer.beta2, 0.99);
  EXPECT_EQ(c.optimizer.eps, 1e-6);
  EXPECT_EQ(c.optimizer.weight_decay, 0.05);
  expect_round_trip(c);
  // The resolved config holds the chosen optimizer's keys only.
  const std::string yaml = config_to_yaml(c);
  EXPECT_NE(yaml.find("beta2: 0.99"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("eps: 1e-06"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("momentum"), std::string::npos) << yaml;
  EXPECT_EQ(config_to_yaml(load_config(write_yaml("data:\n  train: t.h5\n"), {})).find("beta1"),
            std::string::npos);
}

TEST(ConfigToYaml, WritesEveryKeyWithShortNumbers) {
  const std::string yaml = config_to_yaml(load_config(write_yaml(kMinimal), {}));
  for (const char* key : {"name:",
                          "dir: runs/run",
                          "seed: 1",
                          "deterministic: false",
                          "threads: 0",
                          "device: auto",
                          "precision: fp32",
                          "layout: auto",
                          "step_timing: false",
                          "initial: 65536",
                          "growth_interval: 2000",
                          "train: train.h5",
                          "val: \"\"",
                          "prefetch_threads: 2",
                          "shuffle: true",
                          "preset: mlp",
                          "hidden: [192]",
                          "layers: []",
                          "lr: 0.05",
                          "momentum: 0.9",
                          "nesterov: false",
                          "weight_decay: 0",
                          "type: constant",
                          "warmup_epochs: 0",
                          "step_epochs: 30",
                          "gamma: 0.1",
                          "min_lr: 0",
                          "epochs: 5",
                          "batch_size: 64",
                          "val_every: 1",
                          "progress_seconds: 5",
                          "strategy: allreduce",
                          "algorithm: auto",
                          "every: 8",
                          "ring_chunk_bytes: 1048576",
                          "bucket_bytes: 26214400"}) {
    EXPECT_NE(yaml.find(key), std::string::npos) << key << " missing from:\n" << yaml;
  }
}

TEST(ConfigEnums, ToStringNamesMatchTheYamlValues) {
  EXPECT_STREQ(to_string(Device::kAuto), "auto");
  EXPECT_STREQ(to_string(Device::kCpu), "cpu");
  EXPECT_STREQ(to_string(Device::kCuda), "cuda");
  EXPECT_STREQ(to_string(Precision::kFp32), "fp32");
  EXPECT_STREQ(to_string(Precision::kTf32), "tf32");
  EXPECT_STREQ(to_string(Strategy::kAllreduce), "allreduce");
  EXPECT_STREQ(to_string(Strategy::kAverage), "average");
  EXPECT_STREQ(to_string(AllreduceAlgorithm::kRing), "ring");
  EXPECT_STREQ(to_string(AllreduceAlgorithm::kMpi), "mpi");
  EXPECT_STREQ(to_string(AllreduceAlgorithm::kAuto), "auto");
  EXPECT_STREQ(to_string(AllreduceAlgorithm::kNccl), "nccl");
  EXPECT_STREQ(to_string(ScheduleType::kConstant), "constant");
  EXPECT_STREQ(to_string(ScheduleType::kStep), "step");
  EXPECT_STREQ(to_string(ScheduleType::kCosine), "cosine");
  EXPECT_STREQ(to_string(static_cast<Device>(42)), "invalid");
}

TEST(ConfigSchema, EditDistance) {
  EXPECT_EQ(config_schema::edit_distance("momentum", "momentum"), 0u);
  EXPECT_EQ(config_schema::edit_distance("momentun", "momentum"), 1u);
  EXPECT_EQ(config_schema::edit_distance("momnetum", "momentum"), 1u);  // transposition
  EXPECT_EQ(config_schema::edit_distance("LR", "lr"), 0u);
  EXPECT_EQ(config_schema::edit_distance("", "abc"), 3u);
  EXPECT_EQ(config_schema::edit_distance("kitten", "sitting"), 3u);
}

TEST(ConfigSchema, SuggestionNeedsAReasonablyCloseKey) {
  EXPECT_EQ(config_schema::unknown_key_message("optimizer", "lt"),
            "unknown key (did you mean 'lr'?)");
  EXPECT_EQ(config_schema::unknown_key_message("optimizer", "x"), "unknown key");
  // "name" is in several sections, so no single path is suggested.
  EXPECT_EQ(config_schema::unknown_key_message("train", "name"), "unknown key");
}

}  // namespace
}  // namespace hpctrain
