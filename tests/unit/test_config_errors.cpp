// Tests of the config loader's errors: every class of error message, with its line number
// or --set origin and its suggestion, from the file and from overrides (those of the YAML
// text itself: test_config_yaml.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.hpp"
#include "config_test_helpers.hpp"
#include "core/error.hpp"
#include "train/catalog.hpp"

namespace hpctrain {
namespace {

using config_test::expect_error;
using config_test::kFull;
using config_test::kMinimal;
using config_test::load_error;
using config_test::write_yaml;

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
  // A value shown in the error keeps it one line: control characters escaped, long ones cut.
  expect_error(head + "device: \"cpu\\nx\\ty\\x01\"\n",
               "FILE:3: device: expected one of auto, cpu, cuda, got 'cpu\\nx\\ty\\x01'");
  expect_error(head + "train:\n  epochs: |\n    1\n    2\n",
               "FILE:4: train.epochs: expected an integer, got '1\\n2\\n'");
  expect_error(head + "train:\n  epochs: " + std::string(100, '9') + "x\n",
               "FILE:4: train.epochs: expected an integer, got '" + std::string(80, '9') + "...'");
}

// yaml-cpp's depth limit names itself "bad file"; the message says what it is.
TEST(ConfigErrors, NestedTooDeep) {
  const std::string deep = std::string(600, '[') + std::string(600, ']');
  expect_error("data:\n  train: t.h5\nmodel:\n  hidden: " + deep + "\n",
               "FILE:4: YAML nested too deep to read (the reader stops at 500 levels)");
  expect_error("data:\n  train: t.h5\n",
               "--set model.hidden: YAML nested too deep to read (the reader stops at 500 levels)",
               {"model.hidden=" + deep});
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
  // Beyond 64 bits is out of range even where the range is all of int64 (it was clamped).
  expect_error(head + "checkpoint:\n  every_steps: 99999999999999999999999\n",
               "FILE:4: checkpoint.every_steps: expected an integer <= 9223372036854775807, got "
               "99999999999999999999999");
  // One sign: "+-1" and "+-0" are not numbers (they read as -1 and -0).
  expect_error(head + "debug:\n  slow_rank:\n    rank: +-1\n",
               "FILE:5: debug.slow_rank.rank: expected an integer, got '+-1'");
  expect_error(head + "optimizer:\n  weight_decay: +-0\n",
               "FILE:4: optimizer.weight_decay: expected a finite number, got '+-0'");
  // Beyond what a double holds, in either direction, is named as such rather than "not finite".
  expect_error(head + "optimizer:\n  lr: 1e400\n",
               "FILE:4: optimizer.lr: expected a number a double can hold (0, or a magnitude from "
               "4.9e-324 to 1.8e308), got 1e400");
  expect_error(head + "optimizer:\n  lr: 1e-400\n",
               "FILE:4: optimizer.lr: expected a number a double can hold (0, or a magnitude from "
               "4.9e-324 to 1.8e308), got 1e-400");
  // A sleep of 1e300 times a step overflowed the clock (the rank did not sleep at all).
  expect_error(head + "debug:\n  slow_rank:\n    factor: 1e300\n",
               "FILE:5: debug.slow_rank.factor: expected a number >= 1 and <= 1e+06, got 1e300");
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
  // The optimizer's numbers are float32 where it steps: 1e-50 is 0 there (Adam's 0/0 is NaN),
  // and a momentum or beta below 1 as a double may be 1.
  expect_error(head + "optimizer:\n  lr: 1e-50\n",
               "FILE:4: optimizer.lr: expected a number > 0, got 1e-50, which is 0 as the "
               "float32 it is used as");
  // Beyond float32's range a value is inf there (lr 1e39 trained to a "diverged" exit 1), and
  // a positive one below its smallest is 0 (weight_decay 1e-50 was no decay, unsaid).
  expect_error(head + "optimizer:\n  lr: 1e39\n",
               "FILE:4: optimizer.lr: expected a number > 0, got 1e39, which is inf as the "
               "float32 it is used as");
  expect_error(head + "optimizer:\n  weight_decay: 1e39\n",
               "FILE:4: optimizer.weight_decay: expected a number >= 0, got 1e39, which is inf "
               "as the float32 it is used as");
  expect_error(head + "optimizer:\n  weight_decay: 1e-50\n",
               "FILE:4: optimizer.weight_decay: expected a number >= 0, got 1e-50, which is 0 "
               "as the float32 it is used as");
  expect_error(head + "optimizer:\n  clip_grad_norm: 1e39\n",
               "FILE:4: optimizer.clip_grad_norm: expected a number >= 0, got 1e39, which is "
               "inf as the float32 it is used as");
  expect_error(head + "optimizer:\n  name: adam\n  eps: 1e-50\n",
               "FILE:5: optimizer.eps: expected a number > 0, got 1e-50, which is 0 as the "
               "float32 it is used as");
  expect_error(head + "optimizer:\n  name: adam\n  beta2: 0.99999999999\n",
               "FILE:5: optimizer.beta2: expected a number >= 0 and < 1, got 0.99999999999, "
               "which is 1 as the float32 it is used as");
  expect_error(head + "optimizer:\n  momentum: 0.99999999999\n",
               "FILE:4: optimizer.momentum: expected a number >= 0 and < 1, got 0.99999999999, "
               "which is 1 as the float32 it is used as");
  // The loss scaler counts good steps in a float32: exact up to 2^24.
  expect_error(head + "precision: fp16\ntrain:\n  loss_scale:\n    growth_interval: 16777217\n",
               "FILE:6: train.loss_scale.growth_interval: expected an integer <= 16777216, got "
               "16777217");
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
  expect_error("data:\n  train: t.h5\n  cache_mb: 8796093022208\n",
               "FILE:3: data.cache_mb: expected an integer <= 1073741824, got 8796093022208");
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

// Strategy async hands workers whole batches as they go: the keys of lockstep batches are
// refused, each naming its line; its own keys only go with it.
TEST(ConfigErrors, AsyncRefusesLockstepBatchKeys) {
  const std::string head = "data:\n  train: t.h5\ndistributed:\n  strategy: async\n";
  const std::string why =
      "distributed.strategy async hands each worker whole batches of train.batch_size as it goes";
  expect_error(
      head + "train:\n  accumulate_steps: 2\n",
      "FILE:6: train.accumulate_steps: must be 1: " + why + " (distributed.push_every sums them)");
  expect_error(head + "train:\n  batch_size_is: global\n",
               "FILE:6: train.batch_size_is: must be per_rank: " + why);
  expect_error(head + "  balance: auto\n", "FILE:5: distributed.balance: must be equal: " + why +
                                               ", so a slower one takes fewer");
  expect_error(head + "optimizer:\n  clip_grad_norm: 1.0\n",
               "FILE:6: optimizer.clip_grad_norm: must be 0: under distributed.strategy async no "
               "rank sees the summed gradient of a step to clip");
  expect_error(head + "  algorithm: mpi\n",
               "FILE:5: distributed.algorithm: must be auto: under distributed.strategy async the "
               "workers push to and pull from the parameter servers (no all-reduce)");
  expect_error("data:\n  train: t.h5\nrun:\n  deterministic: true\ndistributed:\n  balance: auto\n",
               "FILE:6: distributed.balance: auto shares the batch by measured speed, which "
               "differs from run to run: run.deterministic needs equal or weights");
  expect_error(head + "  max_staleness: -1\n",
               "FILE:5: distributed.max_staleness: expected an integer >= 0, got -1");
  expect_error("data:\n  train: t.h5\ndistributed:\n  pull_every: 2\n",
               "FILE:4: distributed.pull_every: only used with distributed.strategy 'async' "
               "(strategy is 'allreduce')");
  // The ring's unit and NCCL's buckets, set where the algorithm takes neither (they were
  // silently ignored).
  expect_error("data:\n  train: t.h5\ndistributed:\n  algorithm: mpi\n  ring_chunk_bytes: 4096\n",
               "FILE:5: distributed.ring_chunk_bytes: only used with distributed.algorithm 'auto' "
               "or 'ring' (algorithm is 'mpi')");
  expect_error("data:\n  train: t.h5\ndistributed:\n  algorithm: ring\n  bucket_bytes: 4096\n",
               "FILE:5: distributed.bucket_bytes: only used with distributed.algorithm 'auto' or "
               "'nccl' (algorithm is 'ring')");
}

TEST(ConfigErrors, BadEnumValues) {
  const std::string head = "data:\n  train: t.h5\n";
  expect_error(
      head + "distributed:\n  strategy: foo\n",
      "FILE:4: distributed.strategy: expected one of allreduce, average, async, got 'foo'");
  expect_error(head + "distributed:\n  algorithm: gloo\n",
               "FILE:4: distributed.algorithm: expected one of auto, ring, mpi, nccl, got 'gloo'");
  expect_error(head + "device: gpu\n",
               "FILE:3: device: expected one of auto, cpu, cuda, got 'gpu'");
  expect_error(head + "precision: fp8\n",
               "FILE:3: precision: expected one of fp32, tf32, bf16, fp16, got 'fp8'");
  expect_error(head + "precision: fp16\ndistributed:\n  strategy: average\n",
               "FILE:3: precision: fp16 needs distributed.strategy allreduce (its ranks must agree "
               "on the loss scale); bf16 needs no loss scale and works with average, async");
  expect_error(head + "precision: bf16\nlayout: nhwc\ndevice: cpu\n",
               "FILE:4: layout: nhwc needs a GPU (device cuda or auto); the CPU is NCHW");
  expect_error(head + "layout: chwn\n",
               "FILE:3: layout: expected one of auto, nchw, nhwc, got 'chwn'");
  for (const char* precision : {"fp16", "tf32", "fp32"}) {  // float32 NHWC too, asked for
    EXPECT_EQ(load_config(write_yaml(head + "precision: " + precision + "\nlayout: nhwc\n"), {},
                          catalog())
                  .layout,
              Layout::kNhwc)
        << precision;
  }
  expect_error(head + "rnn: cudnn\ndevice: cpu\n",
               "FILE:3: rnn: cudnn needs a GPU (device cuda or auto); the CPU steps");
  expect_error(head + "rnn: fused\n",
               "FILE:3: rnn: expected one of auto, cudnn, steps, got 'fused'");
  EXPECT_EQ(load_config(write_yaml(head + "rnn: steps\n"), {}, catalog()).rnn, RnnEngine::kSteps);
  expect_error(head + "device: cpu\ntrain:\n  cuda_graph: on\n",
               "FILE:5: train.cuda_graph: on needs a GPU (device cuda or auto); the CPU runs "
               "eagerly");
  expect_error(head + "train:\n  accumulate_steps: 2\n  cuda_graph: on\n",
               "FILE:5: train.cuda_graph: on needs train.accumulate_steps 1 (summed micro-batches "
               "run eagerly)");
  expect_error(head + "train:\n  cuda_graph: yes\n",
               "FILE:4: train.cuda_graph: expected one of off, auto, on, got 'yes'");
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
  expect_error("data:\n  train: ''\n",
               "FILE:2: data.train: expected a path or a list of paths, got ''");
  expect_error("data:\n  train: []\n", "FILE:2: data.train: expected at least one path");
  expect_error("data:\n  train: [a.h5, '']\n", "FILE:2: data.train[1]: expected a path, got ''");
  expect_error("data:\n  train: {a: 1}\n", "FILE:2: data.train: expected a string, got a map");
  expect_error("run:\n  name: ''\ndata:\n  train: t.h5\n",
               "FILE:2: run.name: expected a non-empty string, got ''");
}

// run.name is a folder under runs/: it cannot climb out of it or reach elsewhere.
TEST(ConfigErrors, RunNameIsAPlainName) {
  const std::string up = "..";
  for (const std::string& name :
       {up + "/x", up, std::string("a/b"), std::string("/x"), std::string(".")}) {
    expect_error("run:\n  name: '" + name + "'\ndata:\n  train: t.h5\n",
                 "FILE:2: run.name: expected a plain name (no '/' or control characters, not '.' "
                 "or '..'), got '" +
                     name + "'; set run.dir to write elsewhere");
  }
  // A block scalar ends in a newline: a run directory with a newline in its name.
  expect_error("run:\n  name: |\n    x\ndata:\n  train: t.h5\n",
               "FILE:2: run.name: expected a plain name (no '/' or control characters, not '.' or "
               "'..'), got 'x\\n'; set run.dir to write elsewhere");
}

// cpu_ranks names each rank once.
TEST(ConfigErrors, CpuRanksOnce) {
  expect_error("cpu_ranks: [0, 1, 0]\ndata:\n  train: t.h5\n",
               "FILE:1: cpu_ranks: lists rank 0 twice");
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
               "basic_block, lstm, gru, embedding)");
  expect_error(head + "  preset: layers\n  layers:\n    - type: relu\n    - type: dense\n",
               "FILE:7: model.layers[1].units: required key is missing for a dense layer");
  expect_error(head + "  preset: layers\n  layers:\n    - type: dense\n      units: 0\n",
               "FILE:7: model.layers[0].units: expected an integer >= 1, got 0");
  expect_error(head + "  preset: layers\n  layers:\n    - {type: relu, units: 3}\n",
               "FILE:6: model.layers[0].units: only dense, lstm or gru layers take units");
  expect_error(head + "  preset: layers\n  layers:\n    - {type: lstm, units: 8, layers: 0}\n",
               "FILE:6: model.layers[0].layers: expected an integer >= 1, got 0");
  expect_error(head + "  preset: layers\n  layers:\n    - {type: dense, unit: 3}\n",
               "FILE:6: model.layers[0].unit: unknown key (did you mean 'units'?)");
  expect_error(
      head + "  preset: layers\n  layers:\n    - {type: conv}\n",
      "FILE:6: model.layers[0].type: expected one of dense, relu, conv2d, maxpool, "
      "avgpool, global_avgpool, flatten, batchnorm, dropout, basic_block, lstm, gru, embedding, "
      "got 'conv'");
  expect_error(head +
                   "  preset: layers\n  layers:\n    - {type: relu, name: a}\n"
                   "    - {type: relu, name: a}\n",
               "FILE:7: model.layers[1].name: duplicate layer name 'a' (also model.layers[0])");
  for (const auto& [yaml, name] :
       std::vector<std::pair<std::string, std::string>>{{"\"hidden 1\"", "hidden 1"},
                                                        {"classifier", "classifier"},
                                                        {"\"\"", ""},
                                                        {"a/b", "a/b"}}) {
    expect_error(head + "  preset: layers\n  layers:\n    - {type: relu, name: " + yaml + "}\n",
                 "FILE:6: model.layers[0].name: expected letters, digits, '_', '.' and '-', and "
                 "not 'classifier' (the head's name), got '" +
                     name + "'");
  }
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
  // Found by config and inspect too, at the key's line (train alone refused them, naming
  // the file without a line).
  expect_error(
      "data: {train: t.h5}\ndistributed: {strategy: average}\n"
      "train: {on_nonfinite: skip_step}\n",
      "FILE:3: train.on_nonfinite: skip_step is not available with distributed.strategy "
      "average (the ranks sum no gradients, so they would not skip alike); use stop");
  expect_error("data: {train: t.h5}\nprecision: bf16\ndebug: {nonfinite_steps: [3]}\n",
               "FILE:3: debug.nonfinite_steps: needs float32 logits (precision fp32 or tf32) and "
               "a strategy other than async");
  expect_error("data: {train: t.h5}\n",
               "--set debug.nonfinite_steps: needs float32 logits (precision fp32 or tf32) and a "
               "strategy other than async",
               {"distributed.strategy=async", "debug.nonfinite_steps=[2]"});
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
  const Config c =
      load_config(write_yaml(head + "  momentum: 0.9\n"), {"optimizer.name=adam"}, catalog());
  EXPECT_EQ(c.optimizer.name, "adam");
}

TEST(ConfigErrors, KeysOfAnotherPresetScheduleStrategyOrPrecision) {
  const std::string head = "data:\n  train: t.h5\n";
  expect_error(head + "model: {preset: cnn, hidden: [64]}\n",
               "FILE:3: model.hidden: only used with model.preset 'mlp' (preset is 'cnn')");
  expect_error(head + "optimizer:\n  schedule: {gamma: 0.5}\n",
               "FILE:4: optimizer.schedule.gamma: only used with optimizer.schedule.type 'step' "
               "(type is 'constant')");
  expect_error(head + "optimizer:\n  schedule: {type: cosine, step_epochs: 10}\n",
               "FILE:4: optimizer.schedule.step_epochs: only used with optimizer.schedule.type "
               "'step' (type is 'cosine')");
  expect_error(head + "optimizer:\n  schedule: {type: step, min_lr: 0.001}\n",
               "FILE:4: optimizer.schedule.min_lr: only used with optimizer.schedule.type "
               "'cosine' (type is 'step')");
  expect_error(head + "optimizer:\n  lr_reference_batch: 256\n",
               "FILE:4: optimizer.lr_reference_batch: only used with optimizer.lr_scaling "
               "'linear' or 'sqrt' (lr_scaling is 'none')");
  expect_error(head + "distributed:\n  every: 4\n",
               "FILE:4: distributed.every: only used with distributed.strategy 'average' "
               "(strategy is 'allreduce')");
  expect_error(head + "train:\n  loss_scale: {initial: 1024}\n",
               "FILE:4: train.loss_scale.initial: only used with precision 'fp16' (precision is "
               "'fp32')");
  expect_error(head + "precision: bf16\ntrain:\n  loss_scale:\n    growth_interval: 10\n",
               "FILE:6: train.loss_scale.growth_interval: only used with precision 'fp16' "
               "(precision is 'bf16')");
  // A --set that changes the choice names the file's key that no longer applies, and a
  // --set of a key the choice does not use is refused at --set.
  expect_error(head + "optimizer:\n  schedule: {type: step, gamma: 0.5}\n",
               "FILE:4: optimizer.schedule.gamma: only used with optimizer.schedule.type 'step' "
               "(type is 'cosine')",
               {"optimizer.schedule.type=cosine"});
  expect_error(kMinimal,
               "--set distributed.every: only used with distributed.strategy 'average' "
               "(strategy is 'allreduce')",
               {"distributed.every=4"});
}

TEST(ConfigErrors, TildeIsNotExpanded) {
  const std::string what =
      ": '~' is not expanded in a config: write the path in full (in a --set value, $HOME/... "
      "is expanded by the shell)";
  expect_error("data:\n  train: t.h5\nrun:\n  dir: ~/x\n", "FILE:4: run.dir" + what);
  expect_error("data:\n  train: [a.h5, ~/b.h5]\n", "FILE:2: data.train[1]" + what);
  expect_error("data:\n  train: ~user/t.h5\n", "FILE:2: data.train" + what);
  expect_error(kMinimal, "--set checkpoint.dir" + what, {"checkpoint.dir=~/c"});
  expect_error(kMinimal, "--set model.init_from" + what, {"model.init_from=~/c.h5"});
  // Elsewhere in a path '~' is a character like any other; alone it is YAML's null.
  const Config c =
      load_config(write_yaml("data:\n  train: a~/t.h5\nrun:\n  dir: ~\n"), {}, catalog());
  EXPECT_EQ(c.data.train, NameList{"a~/t.h5"});
  EXPECT_EQ(c.run.dir, "runs/run");
}

TEST(ConfigErrors, DuplicateKey) {
  expect_error("data:\n  train: t.h5\ntrain:\n  epochs: 2\n  epochs: 3\n",
               "FILE:5: train.epochs: duplicate key (first given at line 4)");
  expect_error("data:\n  train: t.h5\ndata:\n  prefetch_depth: 0\n",
               "FILE:3: data: duplicate key (first given at line 1)");
}

TEST(ConfigOverrideErrors, DuplicateKeyInTheFileIsAnErrorUnderSetToo) {
  const std::string twice = "data:\n  train: t.h5\ntrain:\n  epochs: 2\n  epochs: 3\n";
  expect_error(twice, "FILE:5: train.epochs: duplicate key (first given at line 4)",
               {"train.epochs=4"});
  expect_error(twice + "  epochs: 5\n",
               "FILE:5: train.epochs: duplicate key (first given at line 4)", {"train.epochs=4"});
  // In a section that a --set replaces as a whole, and in a section on the way to the key.
  expect_error(
      "data:\n  train: t.h5\noptimizer:\n  schedule:\n    type: step\n    gamma: 0.5\n"
      "    gamma: 0.2\n",
      "FILE:7: optimizer.schedule.gamma: duplicate key (first given at line 6)",
      {"optimizer.schedule={type: cosine}"});
  expect_error("data:\n  train: t.h5\ntrain:\n  epochs: 2\ntrain:\n  batch_size: 3\n",
               "FILE:5: train: duplicate key (first given at line 3)", {"train.epochs=4"});
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
               "--set distributed.strategy: expected one of allreduce, average, async, got 'foo'",
               {"distributed.strategy=foo"});
  expect_error(kMinimal, "--set optimizer.schedule.gama: unknown key (did you mean 'gamma'?)",
               {"optimizer.schedule={type: step, gama: 0.5}"});
  expect_error(kMinimal, "--set data.train: expected a path or a list of paths, got ''",
               {"data.train="});
  // A value that starts with a YAML indicator, for a key that does not take text.
  const std::string star = load_error(kMinimal, {"train.epochs=*3"});
  EXPECT_EQ(star.rfind("--set train.epochs: YAML syntax error in value: ", 0), 0u) << star;
  EXPECT_NE(star.find("a value starting with '*' is YAML syntax; quote it inside the argument: "
                      "--set \"train.epochs='*3'\""),
            std::string::npos)
      << star;
  const std::string syntax = load_error(kMinimal, {"model.hidden=[1,2"});
  EXPECT_EQ(syntax.rfind("--set model.hidden: YAML syntax error in value: ", 0), 0u) << syntax;
}

TEST(ConfigOverrideErrors, FileErrorsStillNameTheFileLine) {
  // Overrides elsewhere must not move the location of an error that is in the file.
  expect_error("data:\n  train: t.h5\ntrain:\n  epochs: abc\n",
               "FILE:4: train.epochs: expected an integer, got 'abc'", {"train.batch_size=8"});
  // And an override that fixes the bad value makes the file load.
  const Config c = load_config(write_yaml("data:\n  train: t.h5\ntrain:\n  epochs: abc\n"),
                               {"train.epochs=4"}, catalog());
  EXPECT_EQ(c.train.epochs, 4);
  // The --set wins over a value out of range, too: it is never read.
  EXPECT_EQ(load_config(write_yaml("data:\n  train: t.h5\ntrain:\n  epochs: -1\n"),
                        {"train.epochs=3"}, catalog())
                .train.epochs,
            3);
}

TEST(ConfigOverrideErrors, OverrideBelowAScalarSection) {
  expect_error("data:\n  train: t.h5\ntrain: 5\n", "FILE:3: train: expected a map of keys, got '5'",
               {"train.epochs=3"});
}

}  // namespace
}  // namespace hpctrain
