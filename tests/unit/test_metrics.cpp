// metrics.csv across resumes: the rows of the epochs a checkpoint completed are kept, later
// and torn rows are dropped, and a fresh start truncates; the figures of an epoch that a
// checkpoint in its middle carries.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "train/epoch_tally.hpp"
#include "train/metrics.hpp"

namespace hpctrain {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string first_column(const std::string& csv) {
  std::istringstream lines(csv);
  std::string line, out;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) out += line.substr(0, line.find(',')) + " ";
  return out;
}

EpochMetrics epoch(int e) {
  EpochMetrics m;
  m.epoch = e;
  m.train_loss = 1.0 / e;
  return m;
}

class MetricsCsvTest : public ::testing::Test {
 protected:
  std::string path_ = ::testing::TempDir() + "/metrics_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".csv";
  void TearDown() override { std::filesystem::remove(path_); }
};

TEST_F(MetricsCsvTest, FreshStartTruncatesAndWritesHeader) {
  { std::ofstream(path_) << "old\n1,2\n"; }
  MetricsCsv csv(path_, std::nullopt);
  csv.append(epoch(1));
  const std::string text = read_all(path_);
  EXPECT_EQ(text.rfind("epoch,train_loss,", 0), 0u) << text;
  EXPECT_EQ(first_column(text), "1 ");
}

TEST_F(MetricsCsvTest, ResumeKeepsCompletedEpochsOnly) {
  {
    MetricsCsv csv(path_, std::nullopt);
    for (int e = 1; e <= 4; ++e) csv.append(epoch(e));
  }
  {
    // The checkpoint resumed from completed epoch 2: rows 3 and 4 are trained again.
    MetricsCsv csv(path_, 2);
    EXPECT_EQ(first_column(read_all(path_)), "1 2 ");
    csv.append(epoch(3));
  }
  EXPECT_EQ(first_column(read_all(path_)), "1 2 3 ");
}

TEST_F(MetricsCsvTest, ResumeDropsATornLastLineAndForeignRows) {
  {
    MetricsCsv csv(path_, std::nullopt);
    csv.append(epoch(1));
  }
  { std::ofstream(path_, std::ios::app) << "garbage\n2,0.5,0.7"; }  // torn: no newline
  MetricsCsv csv(path_, 5);
  EXPECT_EQ(first_column(read_all(path_)), "1 ");
}

TEST_F(MetricsCsvTest, ResumeWithoutAFileStartsOne) {
  MetricsCsv csv(path_, 3);
  csv.append(epoch(4));
  const std::string text = read_all(path_);
  EXPECT_EQ(text.rfind("epoch,", 0), 0u);
  EXPECT_EQ(first_column(text), "4 ");
}

// The epoch line rounds the validation figures as the test line does (they were cut:
// 0.603271 showed as 0.6032 there and 0.6033 in the test line); none is "-".
TEST(EpochLine, RoundsTheValidationFigures) {
  EpochMetrics m;
  m.epoch = 2;
  m.train_loss = 0.123456;
  m.train_accuracy = 0.5;
  m.val_loss = 0.603271;
  m.val_accuracy = 12.345678;
  m.time_train_s = 2.0;
  m.samples_per_second = 1000;
  m.data_wait_s = 0.5;
  EXPECT_EQ(epoch_line(m, 5),
            "epoch 2/5  train loss 0.1235 acc 0.5000  val loss 0.6033 acc 12.3457  2.00s  1000 "
            "samples/s  data wait 25.0%  comm 0.0%");
  m.val_loss.reset();
  m.val_accuracy.reset();
  EXPECT_NE(epoch_line(m, 5).find("val loss - acc -"), std::string::npos);
}

TEST(EpochTally, CheckpointArrayKeepsTheFiguresOfItsEpoch) {
  // Sums of a long epoch, which float32 alone would round (1e9 + 7 is not a float).
  const EpochTally t{1234.56789012345,    3.25e-3,     17.0000001, 2468.1357,
                     1.0e9 + 7.123456789, 987654321.0, 1.0e9 + 7};
  std::vector<float> saved;
  encode_tally(3, t, saved);
  ASSERT_EQ(saved.size(), 15u);
  const EpochTally back = decode_tally(saved, 3);
  const double want[7] = {t.train_s, t.wait_s, t.comm_s, t.cpu_s, t.loss_sum, t.correct, t.count};
  const double got[7] = {back.train_s,  back.wait_s,  back.comm_s, back.cpu_s,
                         back.loss_sum, back.correct, back.count};
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(got[i], want[i], std::abs(want[i]) * 1e-13) << i;
  EXPECT_EQ(back.count, t.count);  // whole counts come back whole
  // Another epoch's, a release's before the array, a damaged one: nothing carried.
  EXPECT_EQ(decode_tally(saved, 4).count, 0.0);
  EXPECT_EQ(decode_tally({}, 3).train_s, 0.0);
  saved.pop_back();
  EXPECT_EQ(decode_tally(saved, 3).loss_sum, 0.0);
}

TEST(EpochTally, RowOfTheWholeEpoch) {
  // Carried figures plus the resumed run's: the row's means and rate are the whole epoch's.
  EpochTally whole{10.0, 1.0, 2.0, 20.0, 300.0, 60.0, 100.0};
  whole += EpochTally{30.0, 1.0, 2.0, 40.0, 100.0, 20.0, 100.0};
  EpochMetrics m;
  fill_training_metrics(whole, 2, m);  // two predictions to a sample
  EXPECT_DOUBLE_EQ(m.train_loss, 2.0);
  EXPECT_DOUBLE_EQ(m.train_accuracy, 0.4);
  EXPECT_DOUBLE_EQ(m.time_train_s, 40.0);
  EXPECT_DOUBLE_EQ(m.samples_per_second, 100.0 / 40.0);
  EXPECT_DOUBLE_EQ(m.cpu_s, 60.0);
  EXPECT_DOUBLE_EQ(m.comm_s, 4.0);
  fill_training_metrics(EpochTally{}, 1, m);  // nothing counted: no loss, not a loss of 0
  EXPECT_TRUE(std::isnan(m.train_loss));
  EXPECT_EQ(m.samples_per_second, 0.0);
}

}  // namespace
}  // namespace hpctrain
