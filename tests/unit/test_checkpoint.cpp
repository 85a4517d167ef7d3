// Checkpoint files, the checkpoint directory and the background writer:
// round trips, corruption and truncation detection, retention, and transfer.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "backend/cpu_backend.hpp"
#include "checkpoint/async_writer.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/checkpoint_store.hpp"
#include "checkpoint_test_helpers.hpp"
#include "common/usage_error.hpp"
#include "core/error.hpp"
#include "data-tools/dataset_writer.hpp"
#include "h5/h5.hpp"
#include "nn/presets.hpp"
#include "train/transfer.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

using checkpoint_test::fresh_dir;
using checkpoint_test::sample_state;

TEST(CheckpointFile, RoundTripIsExact) {
  const std::string dir = fresh_dir("roundtrip");
  const CheckpointState a = sample_state(123);
  const std::string path = dir + "/a.h5";
  write_checkpoint_file(path, a);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_TRUE(is_checkpoint_file(path));
  const CheckpointState b = read_checkpoint_file(path);
  EXPECT_EQ(b.step, 123);
  EXPECT_EQ(b.epoch, 12);
  EXPECT_EQ(b.step_in_epoch, 3);
  EXPECT_EQ(b.world_size, 2);
  EXPECT_EQ(b.strategy, "allreduce");
  EXPECT_EQ(b.config_yaml, a.config_yaml);
  EXPECT_EQ(b.architecture, a.architecture);
  EXPECT_EQ(b.arrays, a.arrays);
}

TEST(CheckpointFile, PerRankArraysAndUnknownArraysSurvive) {
  const std::string dir = fresh_dir("perrank");
  CheckpointState a = sample_state(5);
  a.arrays.erase(kParamsArray);
  a.arrays[rank_array_name(0, kParamsArray)] = {1, 2, 3};
  a.arrays[rank_array_name(1, kParamsArray)] = {4, 5, 6};
  a.arrays["future/bn_running_mean"] = {7};
  write_checkpoint_file(dir + "/a.h5", a);
  EXPECT_EQ(read_checkpoint_file(dir + "/a.h5").arrays, a.arrays);
}

TEST(CheckpointFile, FlippedByteIsDetected) {
  const std::string dir = fresh_dir("flip");
  const std::string path = dir + "/a.h5";
  write_checkpoint_file(path, sample_state(7, 100000));
  // Flip one byte in the middle of the file (inside the arrays' data).
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto size = fs::file_size(path);
  f.seekg(static_cast<std::streamoff>(size / 2));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(static_cast<std::streamoff>(size / 2));
  f.write(&c, 1);
  f.close();
  try {
    read_checkpoint_file(path);
    FAIL() << "corruption not detected";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("whole-file checksum does not match"), std::string::npos)
        << e.what();
  }
}

// Every single flipped byte of a checkpoint, wherever it is (HDF5 structure, attributes,
// arrays, the footer itself), is refused before the file's meaning can change, and the check
// reads the file once: no input can send the HDF5 parser into a loop. The one exception is
// the footer's magic, without which the file reads as one of format version 1 whose
// version attribute says 2: refused too.
TEST(CheckpointFile, EveryFlippedByteIsRefused) {
  const std::string dir = fresh_dir("flip_all");
  const std::string path = dir + "/a.h5", flipped = dir + "/b.h5";
  write_checkpoint_file(path, sample_state(7, 20));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_EQ(read_checkpoint_file(path).step, 7);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0x01);
    std::ofstream(flipped, std::ios::binary | std::ios::trunc) << b;
    EXPECT_THROW(read_checkpoint_file(flipped), UsageError)
        << "byte " << i << " of " << bytes.size();
  }
}

TEST(CheckpointFile, TruncatedFileIsDetected) {
  const std::string dir = fresh_dir("trunc");
  const std::string path = dir + "/a.h5";
  write_checkpoint_file(path, sample_state(7, 100000));
  fs::resize_file(path, fs::file_size(path) / 3);
  EXPECT_THROW(read_checkpoint_file(path), UsageError);
  EXPECT_THROW(read_checkpoint_file(dir + "/missing.h5"), UsageError);
}

// A data file given where a checkpoint belongs (--resume, eval, init_from) is named as one.
TEST(CheckpointFile, DataFileIsNamedAsOne) {
  const std::string path = fresh_dir("datafile") + "/train.h5";
  {
    DatasetWriterOptions o;
    o.num_classes = 2;
    DatasetWriter writer(path, o);
    const uint8_t images[2] = {3, 4};
    const int32_t labels[2] = {0, 1};
    writer.append(2, images, labels);
    writer.close();
  }
  try {
    read_checkpoint_file(path);
    ADD_FAILURE() << "a data file was read as a checkpoint";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": not an hpctrain checkpoint"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("a data file"), std::string::npos) << e.what();
  }
}

TEST(CheckpointStore, NewestValidSkipsCorruptAndIgnoresTemporaries) {
  const std::string dir = fresh_dir("store");
  write_checkpoint_file(checkpoint_path(dir, 10), sample_state(10));
  write_checkpoint_file(checkpoint_path(dir, 20), sample_state(20));
  write_checkpoint_file(checkpoint_path(dir, 30), sample_state(30));
  std::ofstream(checkpoint_path(dir, 40) + ".tmp") << "half a file";  // a crash mid-write
  fs::resize_file(checkpoint_path(dir, 30), 100);                     // a corrupt newest one
  // Names that are not ours: too many digits for a step, and a link that loops.
  std::ofstream(dir + "/ckpt-99999999999999999999.h5") << "x";
  fs::create_symlink("ckpt-000000000050.h5", checkpoint_path(dir, 50));
  const auto list = list_checkpoints(dir);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].step, 30);
  EXPECT_EQ(list[2].step, 10);
  const auto loaded = load_newest_valid(dir);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.step, 20);
  EXPECT_FALSE(load_newest_valid(dir + "/nothing-here").has_value());
}

// A checkpoint of a newer format is sound: --resume auto stops at it (exit 2) rather than
// resume an older one, whose run would then delete it as numbered after its commits.
TEST(CheckpointStore, NewerFormatIsNotSkipped) {
  const std::string dir = fresh_dir("newer");
  write_checkpoint_file(checkpoint_path(dir, 10), sample_state(10));
  write_checkpoint_file(checkpoint_path(dir, 20), sample_state(20));
  {
    const H5Handle f(
        HT_CHECK_H5(H5Fopen(checkpoint_path(dir, 20).c_str(), H5F_ACC_RDWR, H5P_DEFAULT)),
        H5Fclose);
    HT_CHECK_H5(H5Adelete(f.get(), "format_version"));
    h5_write_int(f.get(), "format_version", CheckpointState::kFormatVersion + 1);
  }
  test::expect_usage_error([&] { load_newest_valid(dir); },
                           {checkpoint_path(dir, 20), "is newer than this hpctrain reads",
                            "not skipped for an older checkpoint"});
  EXPECT_THROW(load_newest_valid(dir), NewerCheckpointError);
}

TEST(CheckpointStore, PruneKeepsNewest) {
  const std::string dir = fresh_dir("prune");
  for (int64_t s : {1, 2, 3, 4, 5}) {
    write_checkpoint_file(checkpoint_path(dir, s), sample_state(s));
    record_checkpoint(checkpoint_path(dir, s), "run");
  }
  std::ofstream(checkpoint_path(dir, 6) + ".tmp") << "x";
  std::ofstream(dir + "/" + kManifestName + ".tmp.12345") << "x";  // a killed manifest write
  prune_checkpoints(dir, 2, "run", 5);
  const auto list = list_checkpoints(dir);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].step, 5);
  EXPECT_EQ(list[1].step, 4);
  EXPECT_FALSE(fs::exists(checkpoint_path(dir, 6) + ".tmp"));
  EXPECT_FALSE(fs::exists(dir + "/" + kManifestName + ".tmp.12345"));
  std::ifstream manifest(dir + "/" + kManifestName);
  const std::string text((std::istreambuf_iterator<char>(manifest)), {});
  EXPECT_EQ(text, "ckpt-000000000004.h5\trun\nckpt-000000000005.h5\trun\n");
}

// A record that cannot be written whole (the disk fills half-way through its line: here a
// file-size limit) throws and leaves the manifest as it was, not half a line that would join
// the next record's.
TEST(CheckpointStore, RecordThatCannotCompleteLeavesTheManifestWhole) {
  const std::string dir = fresh_dir("record_full");
  const std::string manifest = dir + "/" + kManifestName;
  record_checkpoint(checkpoint_path(dir, 1), "run");
  const auto size = fs::file_size(manifest);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = size + 5;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    record_checkpoint(checkpoint_path(dir, 2), "run");
  } catch (const Error& e) {
    message = e.what();
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message.find(manifest + ": cannot record a checkpoint"), 0u) << message;
  EXPECT_EQ(fs::file_size(manifest), size);
  record_checkpoint(checkpoint_path(dir, 3), "run");
  std::ifstream in(manifest);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "ckpt-000000000001.h5\trun\nckpt-000000000003.h5\trun\n");
}

// What runs before the commit (the writer's manifest record) failing commits nothing: no
// checkpoint, no temporary file.
TEST(CheckpointStore, FailureBeforeTheCommitLeavesNoFile) {
  const std::string dir = fresh_dir("before_commit");
  const std::string path = checkpoint_path(dir, 4);
  bool called = false;
  EXPECT_THROW(write_checkpoint_file(path, sample_state(4),
                                     [&] {
                                       called = fs::exists(path + ".tmp") && !fs::exists(path);
                                       throw Error("no room");
                                     }),
               Error);
  EXPECT_TRUE(called);
  EXPECT_TRUE(fs::is_empty(dir));
}

// A record whose file never came (the write failed after recording it) is taken back, so a
// file copied in under that name later is not the run's to delete; prune and a run's
// start-up drop such lines too (a writer killed between its record and its rename).
TEST(CheckpointStore, RecordsWithoutTheirFileAreDropped) {
  const std::string dir = fresh_dir("unrecord");
  const std::string manifest = dir + "/" + kManifestName;
  auto listed = [&] {
    std::ifstream in(manifest);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  write_checkpoint_file(checkpoint_path(dir, 1), sample_state(1));
  record_checkpoint(checkpoint_path(dir, 1), "run");
  record_checkpoint(checkpoint_path(dir, 2), "run");  // its write then failed
  forget_checkpoint(checkpoint_path(dir, 2));
  EXPECT_EQ(listed(), "ckpt-000000000001.h5\trun\n");
  write_checkpoint_file(checkpoint_path(dir, 2), sample_state(2));  // the user's copy
  write_checkpoint_file(checkpoint_path(dir, 3), sample_state(3));
  record_checkpoint(checkpoint_path(dir, 3), "run");
  record_checkpoint(checkpoint_path(dir, 9), "run");  // a writer killed before its rename
  prune_checkpoints(dir, 1, "run", 3);
  std::vector<int64_t> steps;
  for (const CheckpointEntry& e : list_checkpoints(dir)) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(listed(), "ckpt-000000000003.h5\trun\n");
  forget_checkpoint(checkpoint_path(dir, 3));  // a file that is there keeps its record
  EXPECT_EQ(listed(), "ckpt-000000000003.h5\trun\n");
  // At a run's start-up: every record without its file goes, whoever's; files stay listed.
  record_checkpoint(checkpoint_path(dir, 7), "run");
  record_checkpoint(checkpoint_path(dir, 8), "other");
  forget_missing_checkpoints(dir, "start-up");
  EXPECT_EQ(listed(), "ckpt-000000000003.h5\trun\n");
}

// A commit makes the committed checkpoint the newest: the run's own files numbered above it
// (a corrupt one the resume skipped, an earlier job's counted in other steps) go, whatever
// `keep` allows, so that --resume auto comes back to it; another run's stay.
TEST(CheckpointStore, PruneDeletesOwnFilesNumberedAfterTheCommit) {
  const std::string dir = fresh_dir("prune_after");
  for (int64_t s : {1, 2, 3, 9}) {
    write_checkpoint_file(checkpoint_path(dir, s), sample_state(s));
    record_checkpoint(checkpoint_path(dir, s), "run");
  }
  write_checkpoint_file(checkpoint_path(dir, 8), sample_state(8));
  record_checkpoint(checkpoint_path(dir, 8), "other run");
  prune_checkpoints(dir, 2, "run", 2);
  std::vector<int64_t> steps;
  for (const CheckpointEntry& e : list_checkpoints(dir)) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{8, 2, 1}));
}

// Retention deletes only the checkpoints its run wrote: another run's (in the manifest
// under another owner), ones nobody recorded (copied in by the user), other files and
// links (whose targets stay untouched too) all survive.
TEST(CheckpointStore, PruneLeavesWhatItDidNotWrite) {
  const std::string dir = fresh_dir("foreign");
  write_checkpoint_file(checkpoint_path(dir, 1), sample_state(1));  // the user's copy
  write_checkpoint_file(checkpoint_path(dir, 2), sample_state(2));
  record_checkpoint(checkpoint_path(dir, 2), "other run");
  const std::string victim = fresh_dir("foreign_victim") + "/precious.h5";
  write_checkpoint_file(victim, sample_state(3));
  fs::create_symlink(victim, checkpoint_path(dir, 3));
  record_checkpoint(checkpoint_path(dir, 3), "run");  // a link in our name: not deleted
  std::ofstream(dir + "/notes.txt") << "mine\n";
  {
    AsyncCheckpointWriter w(dir, 1, "run");
    for (int64_t s = 4; s <= 6; ++s) w.submit(sample_state(s));
    w.wait();
  }
  std::vector<int64_t> steps;
  for (const CheckpointEntry& e : list_checkpoints(dir)) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{6, 3, 2, 1}));
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  EXPECT_EQ(read_checkpoint_file(victim).step, 3);
}

TEST(AsyncWriter, WritesInBackgroundAndKeepsLastK) {
  const std::string dir = fresh_dir("async");
  {
    AsyncCheckpointWriter w(dir, 2, "run");
    for (int64_t s = 1; s <= 4; ++s) w.submit(sample_state(s, 50000));
    w.wait();
    const CheckpointWriteStats st = w.stats();
    EXPECT_EQ(st.writes, 4);
    EXPECT_GT(st.bytes, 4 * 2 * 50000 * 4 - 1);
    EXPECT_EQ(st.last_path, checkpoint_path(dir, 4));
  }
  const auto list = list_checkpoints(dir);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(read_checkpoint_file(list[0].path).arrays, sample_state(4, 50000).arrays);
}

TEST(AsyncWriter, SnapshotsLiveArraysBeforeTheOwnerChangesThem) {
  const std::string dir = fresh_dir("snapshot");
  AsyncCheckpointWriter w(dir, 3, "run");
  std::vector<float> live(200000, 1.0f);
  CheckpointState s = sample_state(9, 10);
  s.arrays.clear();
  w.submit(std::move(s), {SnapshotSource{kParamsArray, live.data(), live.size()}});
  w.wait_snapshot();
  EXPECT_FALSE(w.snapshot_pending());
  std::fill(live.begin(), live.end(), 2.0f);  // the next optimizer step
  w.wait();
  const CheckpointState back = read_checkpoint_file(checkpoint_path(dir, 9));
  EXPECT_EQ(back.arrays.at(kParamsArray), std::vector<float>(200000, 1.0f));
}

// A diverging run's parameters (NaN or infinite, shared or a rank's) are never committed:
// the checkpoint before them stays the newest.
TEST(AsyncWriter, NonFiniteParametersAreNotCommitted) {
  const std::string dir = fresh_dir("nonfinite");
  AsyncCheckpointWriter w(dir, 3, "run");
  CheckpointState good = sample_state(4, 10);
  good.arrays[kParamsArray] = std::vector<float>(10, 0.5f);
  w.submit(std::move(good));
  CheckpointState shared = sample_state(5, 10);
  shared.arrays[kParamsArray] = std::vector<float>(10, 0.5f);
  shared.arrays[kParamsArray][3] = std::nanf("");
  w.submit(std::move(shared));
  CheckpointState per_rank = sample_state(6, 10);
  per_rank.arrays[rank_array_name(1, kParamsArray)] = std::vector<float>(10, INFINITY);
  w.submit(std::move(per_rank));
  w.wait();
  EXPECT_EQ(w.stats().writes, 1);
  EXPECT_EQ(w.stats().last_path, checkpoint_path(dir, 4));
  const auto list = list_checkpoints(dir);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].step, 4);
}

TEST(AsyncWriter, FailedWriteIsReported) {
  const std::string dir = fresh_dir("fail");
  AsyncCheckpointWriter w(dir, 2, "run");
  fs::remove_all(dir);  // the directory vanishes under the writer
  w.submit(sample_state(1));
  EXPECT_THROW(w.wait(), Error);
}

// wait_idle (before the trainer calls HDF5 itself, where HDF5 is not thread-safe): the write
// in flight is committed when it returns, and a failed write's error waits for wait().
TEST(AsyncWriter, WaitIdleWaitsForTheWriteAndLeavesItsError) {
  const std::string dir = fresh_dir("idle");
  AsyncCheckpointWriter w(dir, 2, "run");
  w.submit(sample_state(3, 2000000));  // 16 MB: still being written right after submit()
  w.wait_idle();
  EXPECT_TRUE(fs::exists(checkpoint_path(dir, 3)));
  EXPECT_EQ(w.stats().writes, 1);
  fs::remove_all(dir);
  w.submit(sample_state(4));
  EXPECT_NO_THROW(w.wait_idle());
  EXPECT_THROW(w.wait(), Error);
}

TEST(Transfer, LoadsMatchingLayersAndFreezesByName) {
  CpuBackend be(1);
  ModelConfig mc;
  mc.hidden = {8};
  Model source(be, build_layers(mc, 3, {4}), {4}, 2);
  source.init_params(1);
  CheckpointState s = sample_state(1);
  s.architecture = source.architecture();
  s.arrays[kParamsArray].resize(source.param_count());
  source.get_params(s.arrays[kParamsArray].data());
  const std::string path = fresh_dir("transfer") + "/src.h5";
  write_checkpoint_file(path, s);

  // Same base, a new head with 5 classes: dense0 loads, the classifier does not.
  Model target(be, build_layers(mc, 5, {4}), {4}, 2);
  target.init_params(2);
  const std::string report = load_initial_params(path, target);
  EXPECT_NE(report.find("loaded dense0"), std::string::npos) << report;
  EXPECT_NE(report.find("newly initialised classifier"), std::string::npos) << report;
  std::vector<float> a(source.param_count()), b(target.param_count());
  source.get_params(a.data());
  target.get_params(b.data());
  const size_t dense0 = target.layers()[0]->param_count();
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(dense0), b.begin()));

  const auto ranges = trainable_ranges(target, {"dense0"}, "c.yaml");
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].offset, dense0);
  EXPECT_EQ(ranges[0].count, target.param_count() - dense0);
  EXPECT_EQ(trainable_ranges(target, {}, "c.yaml")[0].count, target.param_count());
  EXPECT_THROW(trainable_ranges(target, {"dense9"}, "c.yaml"), UsageError);

  // Checksums that match over arrays or counts another tool got wrong: bad input.
  CheckpointState short_params = s;
  short_params.arrays[kParamsArray].resize(10);
  write_checkpoint_file(path, short_params);
  EXPECT_THROW(load_initial_params(path, target), UsageError);
  CheckpointState bad_count = s;
  bad_count.architecture = "layer dense0 dense params=4x out=8\n";
  write_checkpoint_file(path, bad_count);
  EXPECT_THROW(load_initial_params(path, target), UsageError);
}

// Equal counts are not equal shapes: a conv2d 'c' of 8 3x3 filters on 1 channel and one of
// 8 1x1 filters on 9 channels both have 80 parameters. The second is newly initialised, and
// the report says why; a stride does not change the tensors, so that one loads.
TEST(Transfer, LayersOfEqualCountsButOtherShapesAreNotLoaded) {
  CpuBackend be(1);
  const auto conv = [](const std::string& name, int64_t filters, int64_t kernel, int64_t stride) {
    return LayerSpec{.type = "conv2d",
                     .name = name,
                     .values = {{"filters", filters},
                                {"kernel", kernel},
                                {"stride", stride},
                                {"padding", int64_t{kernel / 2}},
                                {"bias", true}}};
  };
  const LayerSpec pool{.type = "global_avgpool", .name = "pool", .values = {}};
  ModelConfig mc;
  mc.preset = "layers";
  mc.layers = {conv("c", 8, 3, 1), pool};
  const Dims dims = {1, 6, 6};
  Model source(be, build_layers(mc, 3, dims), dims, 2);
  source.init_params(1);
  CheckpointState s = sample_state(1);
  s.architecture = source.architecture();
  s.arrays[kParamsArray].resize(source.param_count());
  source.get_params(s.arrays[kParamsArray].data());
  const std::string path = fresh_dir("transfer_shapes") + "/src.h5";
  write_checkpoint_file(path, s);

  ModelConfig other = mc;
  other.layers = {conv("a", 9, 1, 1), conv("c", 8, 1, 1), pool};
  Model target(be, build_layers(other, 3, dims), dims, 2);
  target.init_params(2);
  ASSERT_EQ(target.layers()[1]->param_count(), source.layers()[0]->param_count());
  std::vector<float> before(target.param_count()), after(target.param_count());
  target.get_params(before.data());
  const std::string report = load_initial_params(path, target);
  EXPECT_EQ(report, "initialised from " + path +
                        ": loaded classifier; newly initialised a, c (shape differs)");
  target.get_params(after.data());
  const auto c_begin = static_cast<std::ptrdiff_t>(target.param_offset(1));
  const auto c_end = c_begin + static_cast<std::ptrdiff_t>(target.layers()[1]->param_count());
  EXPECT_TRUE(
      std::equal(before.begin() + c_begin, before.begin() + c_end, after.begin() + c_begin));

  // Only the shape differs: nothing loads, and the refusal says why.
  other.layers = {conv("c", 8, 1, 1), pool};
  Model only_c(be, build_layers(other, 4, {9, 6, 6}), {9, 6, 6}, 2);
  test::expect_usage_error(
      [&] { load_initial_params(path, only_c); },
      {path, "no layer of this model", "c (shape differs)", "classifier (size differs)"});

  // Another stride or padding, the same tensors: loads.
  other.layers = {conv("c", 8, 3, 2), pool};
  Model strided(be, build_layers(other, 3, dims), dims, 2);
  EXPECT_EQ(load_initial_params(path, strided),
            "initialised from " + path + ": loaded c, classifier");
}

TEST(CheckpointFile, InconsistentCursorIsRefused) {
  const std::string dir = fresh_dir("cursor");
  const auto refused = [&](CheckpointState s) {
    const std::string path = dir + "/c.h5";
    write_checkpoint_file(path, s);
    // inspect names what train and eval refuse (its checksums all match).
    std::ostringstream out;
    const bool inspected = inspect_checkpoint_file(path, out);
    const bool named =
        out.str().find(
            "checksums: all ok\n  train and eval refuse it: inconsistent cursor: step ") !=
        std::string::npos;
    EXPECT_EQ(inspected, !named) << out.str();
    try {
      read_checkpoint_file(path);
    } catch (const UsageError& e) {
      return named && std::string(e.what()).find("inconsistent cursor") != std::string::npos;
    }
    return false;
  };
  EXPECT_FALSE(refused(sample_state(25)));
  CheckpointState s = sample_state(25);
  s.epoch = -1;
  EXPECT_TRUE(refused(s));
  s = sample_state(25);
  s.step_in_epoch = 10;  // not below steps_per_epoch
  EXPECT_TRUE(refused(s));
  s = sample_state(25);
  s.step = 26;
  EXPECT_TRUE(refused(s));
  s = sample_state(25);
  s.epoch = int64_t{1} << 62;  // epoch x steps_per_epoch overflows
  EXPECT_TRUE(refused(s));
  s = sample_state(25);
  s.world_size = 0;
  EXPECT_TRUE(refused(s));
  // Consistent, but past what a resume computes with: an epoch beyond train.epochs' range,
  // and an epoch's samples (steps x global batch) beyond int64 (a crash at the resume).
  s = sample_state(25);
  s.epoch = int64_t{1} << 40;
  s.step = s.epoch * s.steps_per_epoch + s.step_in_epoch;
  EXPECT_TRUE(refused(s));
  s = sample_state(25);
  s.global_batch = int64_t{1} << 62;
  EXPECT_TRUE(refused(s));
}

TEST(CheckpointFile, ParametersThatAreNotFiniteAreRefused) {
  const std::string path = fresh_dir("nan") + "/c.h5";
  CheckpointState s = sample_state(5);
  s.arrays[kParamsArray][7] = std::nanf("");
  write_checkpoint_file(path, s);  // the file layer writes what it is given
  try {
    read_checkpoint_file(path);
    ADD_FAILURE() << "read a checkpoint with a NaN parameter";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
  }
  std::ostringstream out;
  EXPECT_FALSE(inspect_checkpoint_file(path, out));
  EXPECT_NE(out.str().find("train and eval refuse it: array 'model/params' holds values that are "
                           "not finite\n"),
            std::string::npos)
      << out.str();
}

}  // namespace
}  // namespace hpctrain
