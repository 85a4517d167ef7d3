// A data set in several files read as one: rows, labels, row sets and whole loaders over
// the pieces equal those over the file they were cut from, across every file boundary;
// files that do not belong together and globs that match nothing are refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/usage_error.hpp"
#include "core/error.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data/dataset_files.hpp"
#include "data/loader.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using test::expect_usage_error;

constexpr int64_t kRows = 37, kC = 2, kH = 3, kW = 5;
constexpr size_t kSampleBytes = kC * kH * kW;

class DatasetFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("ht_files_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    images_.resize(kRows * kSampleBytes);
    labels_.resize(kRows);
    for (size_t i = 0; i < images_.size(); ++i) images_[i] = static_cast<uint8_t>(i * 31 + 7);
    for (int64_t i = 0; i < kRows; ++i) labels_[i] = static_cast<int32_t>((i * 5) % 4);
    whole_ = write("whole.h5", 0, kRows);
    // Pieces of 10, 1 and 26 rows: a one-row file between two larger ones.
    parts_ = {write("p-2.h5", 11, 26), write("p-0.h5", 0, 10), write("p-1.h5", 10, 1)};
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, int64_t first, int64_t count, int64_t c = kC,
                    int classes = 4) {
    DatasetWriterOptions o;
    o.type = SampleType::kU8;
    o.c = c;
    o.h = kH;
    o.w = kW;
    o.num_classes = classes;
    o.chunk_samples = 4;
    const std::string path = (dir_ / name).string();
    DatasetWriter writer(path, o);
    writer.append(count, images_.data() + first * kSampleBytes, labels_.data() + first);
    writer.close();
    return path;
  }
  // The pieces in row order.
  std::vector<std::string> ordered() const { return {parts_[1], parts_[2], parts_[0]}; }

  fs::path dir_;
  std::vector<uint8_t> images_;
  std::vector<int32_t> labels_;
  std::string whole_;
  std::vector<std::string> parts_;
};

TEST_F(DatasetFilesTest, RowsAndLabelsAcrossFileBoundaries) {
  const DatasetFiles files(ordered());
  const DatasetFile whole(whole_);
  EXPECT_EQ(files.shape().n, kRows);
  EXPECT_EQ(files.shape().num_classes, 4);
  EXPECT_NE(files.path().find("and 2 more files"), std::string::npos) << files.path();
  for (const auto& [start, count] : std::vector<std::pair<int64_t, int64_t>>{
           {0, kRows}, {9, 3}, {10, 1}, {10, 2}, {0, 10}, {11, 26}, {36, 1}, {5, 0}}) {
    std::vector<uint8_t> a(count * kSampleBytes + 1, 0xAB), b(count * kSampleBytes + 1, 0xAB);
    std::vector<int32_t> la(count + 1, -7), lb(count + 1, -7);
    files.read_rows(start, count, a.data(), la.data());
    whole.read_rows(start, count, b.data(), lb.data());
    EXPECT_EQ(a, b) << "rows " << start << "+" << count;
    EXPECT_EQ(la, lb) << "rows " << start << "+" << count;
    std::vector<int32_t> only(count + 1, -7);
    files.read_labels(start, count, only.data());
    EXPECT_EQ(only, lb);
  }
  std::vector<uint8_t> buf(2 * kSampleBytes);
  std::vector<int32_t> lab(2);
  EXPECT_THROW(files.read_rows(36, 2, buf.data(), lab.data()), Error);
  EXPECT_THROW(files.read_rows(-1, 1, buf.data(), lab.data()), Error);
}

TEST_F(DatasetFilesTest, RowSetsSpanningEveryFile) {
  const DatasetFiles files(ordered());
  const DatasetFile whole(whole_);
  for (const std::vector<int64_t>& rows : std::vector<std::vector<int64_t>>{
           {0, 9, 10, 11, 36}, {10}, {3, 4, 5, 6}, {9, 10, 11}, {12, 20, 30}}) {
    const auto n = static_cast<int64_t>(rows.size());
    std::vector<uint8_t> a(n * kSampleBytes), b(n * kSampleBytes);
    std::vector<int32_t> la(n), lb(n);
    files.read_row_set(rows.data(), n, a.data(), la.data());
    whole.read_row_set(rows.data(), n, b.data(), lb.data());
    EXPECT_EQ(a, b);
    EXPECT_EQ(la, lb);
  }
}

TEST_F(DatasetFilesTest, LoaderOverPiecesEqualsLoaderOverTheWhole) {
  const DatasetFiles files(ordered());
  const DatasetFile whole(whole_);
  const Shard shard{4, 33};  // a shard crossing both boundaries
  for (const int64_t cache : {int64_t{1} << 40, int64_t{0}}) {
    LoaderOptions o;
    o.batch = 4;
    o.epochs = 2;
    o.shuffle = true;
    o.seed = 9;
    o.threads = 2;
    o.cache_bytes = cache;
    Loader a(files, shard, o), b(whole, shard, o);
    for (int64_t i = 0; i < 2 * a.batches_per_epoch(); ++i) {
      const BatchBuffer& x = a.next();
      const BatchBuffer& y = b.next();
      ASSERT_EQ(x.size, y.size);
      EXPECT_EQ(std::memcmp(x.images.data(), y.images.data(), x.size * kSampleBytes * 4), 0)
          << "batch " << i << (cache == 0 ? " streamed" : " cached");
      EXPECT_TRUE(std::equal(x.labels.begin(), x.labels.begin() + x.size, y.labels.begin()));
    }
  }
}

TEST_F(DatasetFilesTest, FilesThatDoNotBelongTogetherAreRefusedByName) {
  const std::string wide = write("wide.h5", 0, 4, /*c=*/1);
  expect_usage_error(
      [&] {
        DatasetFiles({parts_[1], wide});
      },
      {wide, "not part of the same data set as " + parts_[1], "samples are 1x3x5"});
  const std::string more_classes = write("classes.h5", 0, 4, kC, /*classes=*/6);
  expect_usage_error(
      [&] {
        DatasetFiles({parts_[1], parts_[2], more_classes});
      },
      {more_classes, "6 classes, the first file 4"});
  expect_usage_error(
      [&] {
        DatasetFiles({parts_[1], (dir_ / "missing.h5").string()});
      },
      {"missing.h5: no such file"});
}

// Token files of vocabularies of one size but other tokens (two hpctrain-data text runs)
// are refused as such, naming the first id that differs; one vocabulary is accepted.
TEST(CheckLikeTraining, AnotherVocabularyOfTheSameSizeIsNamed) {
  DatasetShape train;
  train.c = train.h = 1;
  train.w = 8;
  train.type = SampleType::kToken;
  train.vocab_size = train.num_classes = 3;
  train.labels_per_sample = 8;
  train.vocabulary = {"a", "b", "c"};
  DatasetShape val = train;
  check_like_training(val, train, "val.h5", "val");
  val.vocabulary = {"a", "x", "c"};
  expect_usage_error([&] { check_like_training(val, train, "val.h5", "val"); },
                     {"val.h5: data.val has another vocabulary than data.train, of the same "
                      "size (id 1 is 'x' against 'b')"});
}

TEST_F(DatasetFilesTest, GlobsExpandInByteOrderAndMustMatch) {
  const std::string pattern = (dir_ / "p-*.h5").string();
  EXPECT_EQ(expand_data_paths({pattern}, "cfg: data.train"), ordered());
  // A plain path is kept as it is; globs and paths mix in the given order. A missing path
  // is named with the key.
  EXPECT_EQ(expand_data_paths({whole_, (dir_ / "p-[01].h5").string()}, "k"),
            (std::vector<std::string>{whole_, parts_[1], parts_[2]}));
  // One file reached twice, by the same name, by a glob or by another name: its rows would
  // count twice (they trained twice an epoch, silently).
  expect_usage_error(
      [&] {
        expand_data_paths({whole_, whole_}, "k");
      },
      {"k: " + whole_ + " is listed twice: its rows would count twice"});
  expect_usage_error(
      [&] {
        expand_data_paths({parts_[1], (dir_ / "p-*.h5").string()}, "k");
      },
      {"k: " + parts_[1] + " is listed twice: its rows would count twice"});
  const std::string other_name = (dir_ / "." / fs::path(whole_).filename()).string();
  expect_usage_error(
      [&] {
        expand_data_paths({whole_, other_name}, "k");
      },
      {"k: " + other_name + " is listed twice (also as " + whole_ + ")"});
  EXPECT_EQ(shared_data_file({parts_[1], other_name}, {whole_}), other_name);
  EXPECT_EQ(shared_data_file({parts_[1]}, {whole_}), "");
  expect_usage_error(
      [&] {
        expand_data_paths({whole_, "nope.h5"}, "cfg.yaml: data.train");
      },
      {"cfg.yaml: data.train: nope.h5: no such file"});
  expect_usage_error([&] { expand_data_paths({(dir_ / "q-*.h5").string()}, "cfg.yaml: data.val"); },
                     {"cfg.yaml: data.val: '", "q-*.h5' matches no file"});
  EXPECT_EQ(open_data({}), nullptr);
  EXPECT_NE(dynamic_cast<const DatasetFile*>(open_data({whole_}).get()), nullptr);
  EXPECT_NE(dynamic_cast<const DatasetFiles*>(open_data(ordered()).get()), nullptr);
}

}  // namespace
}  // namespace hpctrain
