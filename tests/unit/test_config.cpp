// Tests of the config loader: valid files, defaults, --set overrides, the config_to_yaml
// round trip, enum names, the catalog and the suggestion of a misspelt key (the error
// messages are in test_config_errors.cpp). Each test writes its YAML into a fresh file
// under the gtest temp directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/config_reference.hpp"
#include "config/config_schema.hpp"
#include "config_test_helpers.hpp"
#include "core/error.hpp"
#include "train/catalog.hpp"

namespace hpctrain {
namespace {

using config_test::kFull;
using config_test::kMinimal;
using config_test::write_yaml;

namespace fs = std::filesystem;

TEST(ConfigLoad, FullFileSetsEveryField) {
  const std::string path = write_yaml(kFull);
  const Config c = load_config(path, {}, catalog());
  EXPECT_EQ(c.source_file, path);
  EXPECT_EQ(c.run.name, "full");
  EXPECT_EQ(c.run.dir, "/scratch/full");
  EXPECT_EQ(c.run.seed, 18446744073709551615ULL);
  EXPECT_TRUE(c.run.deterministic);
  EXPECT_EQ(c.run.threads, 3);
  EXPECT_EQ(c.device, Device::kCuda);
  EXPECT_EQ(c.precision, Precision::kTf32);
  EXPECT_EQ(c.layout, Layout::kNchw);
  EXPECT_EQ(c.data.train, NameList{"a/train.h5"});
  EXPECT_EQ(c.data.val, NameList{"a/val.h5"});
  EXPECT_EQ(c.data.test, NameList{"a/test.h5"});
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
  EXPECT_DOUBLE_EQ(c.optimizer.schedule.min_lr, 0.0);  // cosine only
  EXPECT_EQ(c.train.epochs, 12);
  EXPECT_EQ(c.train.batch_size, 128);
  EXPECT_EQ(c.train.val_every, 2);
  EXPECT_DOUBLE_EQ(c.train.progress_seconds, 0.0);
  EXPECT_TRUE(c.train.step_timing);
  EXPECT_EQ(c.distributed.strategy, "average");
  EXPECT_EQ(c.distributed.algorithm, AllreduceAlgorithm::kRing);
  EXPECT_EQ(c.distributed.every, 4);
  EXPECT_EQ(c.distributed.ring_chunk_bytes, int64_t{4294967296});
}

TEST(ConfigLoad, MinimalFileTakesDefaults) {
  const Config c = load_config(write_yaml(kMinimal), {}, catalog());
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
  EXPECT_EQ(c.data.train, NameList{"train.h5"});
  EXPECT_TRUE(c.data.val.empty());
  EXPECT_TRUE(c.data.test.empty());
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
  EXPECT_EQ(c.distributed.strategy, "allreduce");
  EXPECT_EQ(c.distributed.algorithm, AllreduceAlgorithm::kAuto);
  EXPECT_EQ(c.distributed.every, d.distributed.every);
  EXPECT_EQ(c.distributed.ring_chunk_bytes, d.distributed.ring_chunk_bytes);
}

TEST(ConfigLoad, RunDirDefaultsToRunsSlashName) {
  const Config c =
      load_config(write_yaml("run:\n  name: exp7\ndata:\n  train: t.h5\n"), {}, catalog());
  EXPECT_EQ(c.run.dir, "runs/exp7");
}

TEST(ConfigLoad, EmptySectionsAndOptionalPathsAreAccepted) {
  const Config c =
      load_config(write_yaml("run:\ntrain:\ndata:\n  train: t.h5\n  val:\n"), {}, catalog());
  EXPECT_TRUE(c.data.val.empty());
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
                               {}, catalog());
  ASSERT_EQ(c.model.layers.size(), 3u);
  EXPECT_EQ(c.model.layers[0].type, "dense");
  EXPECT_EQ(c.model.layers[0].name, "dense0");
  EXPECT_EQ(c.model.layers[0].integer("units"), 300);
  EXPECT_EQ(c.model.layers[1].type, "relu");
  EXPECT_EQ(c.model.layers[1].name, "relu1");
  EXPECT_EQ(c.model.layers[2].name, "bottleneck");
  EXPECT_EQ(c.model.layers[2].integer("units"), 30);
  EXPECT_TRUE(c.model.hidden.empty());
}

TEST(ConfigLoad, ShippedFashionMnistConfigIsValid) {
  const fs::path file = fs::path(HT_SOURCE_DIR) / "configs" / "fashion_mnist_mlp.yaml";
  const Config c = load_config(file.string(), {}, catalog());
  EXPECT_EQ(c.run.name, "fashion_mnist_mlp");
  EXPECT_EQ(c.run.seed, 1u);
  EXPECT_EQ(c.data.train, NameList{"data/fashion-mnist/train.h5"});
  EXPECT_EQ(c.data.val, NameList{"data/fashion-mnist/val.h5"});
  EXPECT_EQ(c.data.test, NameList{"data/fashion-mnist/test.h5"});
  EXPECT_EQ(c.model.preset, "mlp");
  EXPECT_EQ(c.model.hidden, std::vector<int>{192});
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.05);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, 0.9);
  EXPECT_EQ(c.train.epochs, 5);
  EXPECT_EQ(c.train.batch_size, 64);
  EXPECT_EQ(c.distributed.strategy, "allreduce");
  EXPECT_EQ(c.distributed.algorithm, AllreduceAlgorithm::kAuto);
}

TEST(ConfigLoad, ShippedMlpConfigSwitchesPresetBySet) {
  // model.hidden: [192] is the default, so another preset does not make it an error.
  const fs::path file = fs::path(HT_SOURCE_DIR) / "configs" / "fashion_mnist_mlp.yaml";
  const Config c = load_config(file.string(), {"model.preset=cnn"}, catalog());
  EXPECT_EQ(c.model.preset, "cnn");
  EXPECT_TRUE(c.model.hidden.empty());
}

TEST(ConfigLoad, KeysOfTheChosenScheduleScalingAndPrecision) {
  const Config cosine = load_config(
      write_yaml("data: {train: t.h5}\noptimizer:\n  lr_scaling: sqrt\n  lr_reference_batch: "
                 "256\n  schedule: {type: cosine, min_lr: 0.0001}\n"),
      {}, catalog());
  EXPECT_DOUBLE_EQ(cosine.optimizer.schedule.min_lr, 0.0001);
  EXPECT_EQ(cosine.optimizer.lr_reference_batch, 256);
  const Config fp16 = load_config(
      write_yaml("data: {train: t.h5}\nprecision: fp16\ntrain:\n  loss_scale:\n    initial: "
                 "1024\n    growth_interval: 50\n"),
      {}, catalog());
  EXPECT_EQ(fp16.train.loss_scale.initial, 1024.0);
  EXPECT_EQ(fp16.train.loss_scale.growth_interval, 50);
  // At their defaults, keys of another choice go with any: a file may spell them out.
  const Config d = load_config(
      write_yaml("data: {train: t.h5}\noptimizer:\n  lr_reference_batch: 0\n  schedule: {gamma: "
                 "0.1, step_epochs: 30, min_lr: 0}\ntrain: {loss_scale: {initial: 65536}}\n"
                 "distributed: {every: 8}\nmodel: {preset: cnn, hidden: [192]}\n"),
      {}, catalog());
  EXPECT_EQ(d.optimizer.schedule.type, ScheduleType::kConstant);
  EXPECT_TRUE(d.model.hidden.empty());
  EXPECT_EQ(
      load_config(write_yaml(kMinimal), {"data.cache_mb=1073741824"}, catalog()).data.cache_mb,
      int64_t{1} << 30);
}

TEST(ConfigOverride, TextStartingWithAYamlIndicatorIsTheText) {
  // '*', '&', '!', '%', '@', '`', '#', '|' and '>' cannot start a plain YAML scalar; for a
  // key that takes text or paths the value is the text itself.
  const Config c = load_config(write_yaml(kMinimal),
                               {"data.train=*.h5", "data.val=&v.h5", "run.name=%x", "run.dir=@out",
                                "checkpoint.dir=!c", "model.init_from=`x`", "data.test=#t.h5"},
                               catalog());
  EXPECT_EQ(c.data.train, NameList{"*.h5"});
  EXPECT_EQ(c.data.val, NameList{"&v.h5"});
  EXPECT_EQ(c.run.name, "%x");
  EXPECT_EQ(c.run.dir, "@out");
  EXPECT_EQ(c.checkpoint.dir, "!c");
  EXPECT_EQ(c.model.init_from, "`x`");
  EXPECT_EQ(c.data.test, NameList{"#t.h5"});
  // Quoted inside the argument, or in a list, the value is YAML as before.
  const Config q =
      load_config(write_yaml(kMinimal), {"data.train='*.h5'", "data.val=['*.h5']"}, catalog());
  EXPECT_EQ(q.data.train, NameList{"*.h5"});
  EXPECT_EQ(q.data.val, NameList{"*.h5"});
}

TEST(ConfigReference, ShowsTheLimitsTheLoaderEnforces) {
  const std::string md = config_reference_markdown(catalog());
  for (const char* row :
       {"| `run.seed` | integer | `1` | 0 to 18446744073709551615 |",
        "| `data.cache_mb` | integer | `8192` | 0 to 1073741824 |",
        "| `optimizer.schedule.gamma` | number | `0.1` | > 0 and <= 1; only with "
        "optimizer.schedule.type step |",
        // An int field's upper bound is INT_MAX: the reference says so, as the loader does.
        "| `distributed.every` | integer | `8` | 1 to 2147483647; only with distributed.strategy "
        "average |",
        "| `model.hidden` | list of integers | `[192]` | each 1 to 2147483647; only with "
        "model.preset mlp |",
        "| `train.loss_scale.initial` | number | `65536` | >= 1 and <= 1e+30; only with "
        "precision fp16 |"}) {
    EXPECT_NE(md.find(row), std::string::npos) << row;
  }
  config_test::expect_error(kMinimal,
                            "--set train.epochs: expected an integer <= 2147483647, got 2147483648",
                            {"train.epochs=2147483648"});
  config_test::expect_error(
      "data: {train: t.h5}\nmodel: {hidden: [2147483648]}\n",
      "FILE:2: model.hidden[0]: expected an integer <= 2147483647, got 2147483648");
}

TEST(ConfigOverride, ASectionSetToNothingIsRefused) {
  // It would have reset every key of the section to its default (a CNN config trained the
  // default MLP).
  for (const char* key : {"model", "train", "data.augment"}) {
    for (const char* value : {"", "~", "null"}) {
      config_test::expect_error(kMinimal,
                                std::string("--set ") + key +
                                    ": expected a map of keys, got nothing (set one key: --set " +
                                    key + ".KEY=VALUE)",
                                {std::string(key) + "=" + value});
    }
  }
  // A map replaces the section, as in the file.
  const Config c =
      load_config(write_yaml(kMinimal), {"optimizer={name: adam, lr: 0.01}"}, catalog());
  EXPECT_EQ(c.optimizer.name, "adam");
  EXPECT_FLOAT_EQ(c.optimizer.lr, 0.01f);
}

TEST(ConfigOverride, ScalarsReplaceFileValues) {
  const Config c = load_config(write_yaml(kFull),
                               {"train.epochs=3", "optimizer.lr=0.25", "run.deterministic=false",
                                "device=cpu", "run.name=renamed", "distributed.every=16"},
                               catalog());
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
  const Config c = load_config(write_yaml(kMinimal),
                               {"model.hidden=[64, 32]", "optimizer.schedule.type=cosine",
                                "optimizer.schedule.min_lr=0.001"},
                               catalog());
  EXPECT_EQ(c.model.hidden, (std::vector<int>{64, 32}));
  EXPECT_EQ(c.optimizer.schedule.type, ScheduleType::kCosine);
  EXPECT_DOUBLE_EQ(c.optimizer.schedule.min_lr, 0.001);
  EXPECT_EQ(c.run.dir, "runs/run");
}

TEST(ConfigOverride, LaterOverrideWinsAndValueMayContainEquals) {
  const Config c = load_config(write_yaml(kMinimal),
                               {"train.epochs=2", "train.epochs=9", "run.name=a=b"}, catalog());
  EXPECT_EQ(c.train.epochs, 9);
  EXPECT_EQ(c.run.name, "a=b");
}

TEST(ConfigOverride, ReplacesLayerList) {
  const Config c = load_config(
      write_yaml(kMinimal),
      {"model.preset=layers", "model.layers=[{type: dense, units: 10}, {type: relu, name: act}]"},
      catalog());
  ASSERT_EQ(c.model.layers.size(), 2u);
  EXPECT_EQ(c.model.layers[0].integer("units"), 10);
  EXPECT_EQ(c.model.layers[1].name, "act");
}

TEST(ConfigOverride, ChangesOneKeyOfTheKeysYamlAliasesShare) {
  const Config c = load_config(write_yaml("data: {train: &d t.h5, val: *d}\n"
                                          "train: {epochs: &e 2, val_every: *e}\n"),
                               {"train.epochs=3", "data.train=u.h5"}, catalog());
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.train.val_every, 2);
  EXPECT_EQ(c.data.train, NameList{"u.h5"});
  EXPECT_EQ(c.data.val, NameList{"t.h5"});
  // A section that aliases share: the key of the section named changes, the other keeps
  // its value (a key only one of them has went into both: checkpoint.seed was unknown).
  const std::string both = "data: {train: t.h5}\nrun: &r {dir: /a}\ncheckpoint: *r\n";
  const Config s = load_config(write_yaml(both), {"run.dir=/b", "run.seed=5"}, catalog());
  EXPECT_EQ(s.run.dir, "/b");
  EXPECT_EQ(s.run.seed, 5u);
  EXPECT_EQ(s.checkpoint.dir, "/a");
  const Config t = load_config(write_yaml(both), {"checkpoint.dir=/c"}, catalog());
  EXPECT_EQ(t.run.dir, "/a");
  EXPECT_EQ(t.checkpoint.dir, "/c");
  // Errors below a copied section still name the file's line.
  config_test::expect_error("data: {train: t.h5}\nrun: {dir: /a, sead: 1}\n",
                            "FILE:2: run.sead: unknown key (did you mean 'seed'?)", {"run.seed=5"});
}

TEST(ConfigOverride, EmptyValueClearsAnOptionalPath) {
  const Config c = load_config(write_yaml("data:\n  train: t.h5\n  val: v.h5\n"),
                               {"data.val=", "run.dir="}, catalog());
  EXPECT_TRUE(c.data.val.empty());
  EXPECT_EQ(c.run.dir, "runs/run");
}

TEST(ConfigDataFiles, OnePathOrAListOfPathsAndGlobs) {
  const Config c =
      load_config(write_yaml("data:\n  train: [p-00000.h5, 'p-0000[12].h5']\n  val: v.h5\n"),
                  {"data.test=[t1.h5, 't*.h5']"}, catalog());
  EXPECT_EQ(c.data.train, (NameList{"p-00000.h5", "p-0000[12].h5"}));
  EXPECT_EQ(c.data.val, NameList{"v.h5"});
  EXPECT_EQ(c.data.test, (NameList{"t1.h5", "t*.h5"}));
  // config.yaml writes the lists back, and they load to the same config.
  const Config again = load_config(write_yaml(config_to_yaml(c)), {}, catalog());
  EXPECT_EQ(again.data.train, c.data.train);
  EXPECT_EQ(again.data.test, c.data.test);
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
    EXPECT_TRUE(a.model.layers[i].values == b.model.layers[i].values) << i;
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
  const Config b = load_config(path, {}, catalog());
  SCOPED_TRACE(yaml);
  expect_same_config(a, b);
  Config b_same_source = b;
  b_same_source.source_file = a.source_file;
  EXPECT_EQ(config_to_yaml(b_same_source), yaml);
}

TEST(ConfigCheckpoint, DefaultsAndOverrides) {
  const Config d = load_config(write_yaml(kMinimal), {}, catalog());
  EXPECT_EQ(d.checkpoint.dir, "runs/run/checkpoints");
  EXPECT_EQ(d.checkpoint.every_steps, 0);
  EXPECT_EQ(d.checkpoint.keep, 3);
  const Config c =
      load_config(write_yaml(kMinimal),
                  {"checkpoint.every_steps=50", "checkpoint.every_seconds=1.5", "checkpoint.keep=2",
                   "checkpoint.at_epoch_end=true", "model.init_from=a/ckpt.h5",
                   "model.freeze=[dense0]", "distributed.timeout_seconds=30"},
                  catalog());
  EXPECT_EQ(c.checkpoint.every_steps, 50);
  EXPECT_EQ(c.checkpoint.every_seconds, 1.5);
  EXPECT_EQ(c.checkpoint.keep, 2);
  EXPECT_TRUE(c.checkpoint.at_epoch_end);
  EXPECT_EQ(c.model.init_from, "a/ckpt.h5");
  EXPECT_EQ(c.model.freeze, std::vector<std::string>{"dense0"});
  EXPECT_EQ(c.distributed.timeout_seconds, 30.0);
  expect_round_trip(c);
  EXPECT_THROW(load_config(write_yaml(kMinimal), {"checkpoint.keep=0"}, catalog()), UsageError);
  EXPECT_THROW(load_config(write_yaml(kMinimal), {"checkpoint.every_stepz=3"}, catalog()),
               UsageError);
}

TEST(ConfigToYaml, RoundTripsFullAndDefaultConfigs) {
  expect_round_trip(load_config(write_yaml(kFull), {}, catalog()));
  expect_round_trip(load_config(write_yaml(kMinimal), {}, catalog()));
}

TEST(ConfigToYaml, RoundTripsLayersAndAwkwardValues) {
  const Config c = load_config(
      write_yaml(kMinimal),
      {"model.preset=layers", "model.layers=[{type: dense, units: 7}, {type: relu, name: 'null'}]",
       "run.name='true'", "data.val='null'", "optimizer.lr=0.1", "optimizer.momentum=0.3",
       "optimizer.weight_decay=1.0000000000000002e-05", "train.progress_seconds=1e-300",
       "optimizer.schedule.type=step", "optimizer.schedule.gamma=0.3333333333333333", "run.seed=0"},
      catalog());
  EXPECT_EQ(c.run.name, "true");
  EXPECT_EQ(c.data.val, NameList{"null"});
  EXPECT_EQ(c.model.layers[1].name, "null");
  expect_round_trip(c);
}

TEST(ConfigToYaml, AdamKeysRoundTrip) {
  const Config c = load_config(
      write_yaml("data:\n  train: t.h5\noptimizer:\n  name: adamw\n  lr: 0.001\n  beta1: 0.8\n"
                 "  beta2: 0.99\n  eps: 1e-6\n  weight_decay: 0.05\n"),
      {}, catalog());
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
  EXPECT_EQ(config_to_yaml(load_config(write_yaml("data:\n  train: t.h5\n"), {}, catalog()))
                .find("beta1"),
            std::string::npos);
}

TEST(ConfigToYaml, WritesEveryKeyWithShortNumbers) {
  const std::string yaml = config_to_yaml(load_config(write_yaml(kMinimal), {}, catalog()));
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
  EXPECT_STREQ(to_string(AllreduceAlgorithm::kRing), "ring");
  EXPECT_STREQ(to_string(AllreduceAlgorithm::kMpi), "mpi");
  EXPECT_STREQ(to_string(AllreduceAlgorithm::kAuto), "auto");
  EXPECT_STREQ(to_string(AllreduceAlgorithm::kNccl), "nccl");
  EXPECT_STREQ(to_string(ScheduleType::kConstant), "constant");
  EXPECT_STREQ(to_string(ScheduleType::kStep), "step");
  EXPECT_STREQ(to_string(ScheduleType::kCosine), "cosine");
  EXPECT_STREQ(to_string(static_cast<Device>(42)), "invalid");
}

// distributed.strategy takes the registered exchange strategies (train/exchange.cpp).
TEST(ConfigCatalog, StrategiesAreTheRegisteredOnes) {
  EXPECT_EQ(catalog().strategy_names(),
            (std::vector<std::string_view>{"allreduce", "average", "async"}));
  const StrategyDecl& allreduce = *catalog().strategy("allreduce");
  const StrategyDecl& average = *catalog().strategy("average");
  const StrategyDecl& async = *catalog().strategy("async");
  EXPECT_TRUE(allreduce.identical_replicas && allreduce.one_stored_state && allreduce.lockstep);
  EXPECT_TRUE(!average.identical_replicas && !average.one_stored_state && average.lockstep);
  EXPECT_TRUE(!async.identical_replicas && async.one_stored_state && !async.lockstep);
  EXPECT_EQ(catalog().strategy("downpour"), nullptr);
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
  EXPECT_EQ(config_schema::KeyNames(catalog()).unknown_key_message("optimizer", "lt"),
            "unknown key (did you mean 'lr'?)");
  EXPECT_EQ(config_schema::KeyNames(catalog()).unknown_key_message("optimizer", "x"),
            "unknown key");
  // "name" is in several sections, so no single path is suggested.
  EXPECT_EQ(config_schema::KeyNames(catalog()).unknown_key_message("train", "name"), "unknown key");
}

}  // namespace
TEST(ConfigEmit, FirstDifferenceNamesTheKeyAndBothValues) {
  const Config a = load_config(write_yaml(kMinimal), {}, catalog());
  const Config b = load_config(write_yaml(kMinimal), {"train.epochs=7"}, catalog());
  const Config c = load_config(write_yaml(kMinimal), {"data.augment.flip=true"}, catalog());
  Config elsewhere = a;
  elsewhere.source_file = "other.yaml";  // the comment line differs only
  EXPECT_EQ(config_first_difference(config_to_yaml(a), config_to_yaml(elsewhere)), "");
  EXPECT_EQ(config_first_difference(config_to_yaml(b), config_to_yaml(a)),
            "train.epochs: 7 against " + std::to_string(a.train.epochs));
  EXPECT_EQ(config_first_difference(config_to_yaml(a), config_to_yaml(c)),
            "data.augment.flip: false against true");
  // A key one text has and the other lacks (an optimizer's own keys).
  const Config adam = load_config(write_yaml(kMinimal), {"optimizer.name=adam"}, catalog());
  const std::string d = config_first_difference(config_to_yaml(a), config_to_yaml(adam));
  EXPECT_EQ(d.rfind("optimizer.", 0), 0u) << d;
}

}  // namespace hpctrain
