#include "train/epoch_tally.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"

namespace hpctrain {
EpochTally& EpochTally::operator+=(const EpochTally& o) {
  train_s += o.train_s;
  wait_s += o.wait_s;
  comm_s += o.comm_s;
  cpu_s += o.cpu_s;
  loss_sum += o.loss_sum;
  correct += o.correct;
  count += o.count;
  return *this;
}

EpochTally reduce_tally(Communicator& comm, const EpochTally& mine, std::vector<double>& scratch) {
  HT_REQUIRE(scratch.size() >= kTallyFigures * static_cast<size_t>(comm.size()),
             "reduce_tally: scratch smaller than the ranks' figures");
  const double v[kTallyFigures] = {mine.train_s,  mine.wait_s,  mine.comm_s, mine.cpu_s,
                                   mine.loss_sum, mine.correct, mine.count};
  comm.allgather(v, static_cast<int>(kTallyFigures), scratch.data());
  EpochTally all;
  for (int r = 0; r < comm.size(); ++r) {
    const double* f = scratch.data() + kTallyFigures * static_cast<size_t>(r);
    all.train_s = std::max(all.train_s, f[0]);
    all.wait_s = std::max(all.wait_s, f[1]);
    all.comm_s = std::max(all.comm_s, f[2]);
    all.cpu_s += f[3];
    all.loss_sum += f[4];
    all.correct += f[5];
    all.count += f[6];
  }
  all.cpu_s /= comm.size();
  return all;
}

void split_double(double v, float* pair) {
  pair[0] = static_cast<float>(v);
  pair[1] = static_cast<float>(v - static_cast<double>(pair[0]));
}

double join_floats(const float* pair) {
  return static_cast<double>(pair[0]) + static_cast<double>(pair[1]);
}

void encode_tally(int epoch, const EpochTally& t, std::vector<float>& out) {
  const double v[kTallyFigures] = {t.train_s,  t.wait_s,  t.comm_s, t.cpu_s,
                                   t.loss_sum, t.correct, t.count};
  out.assign(1 + 2 * kTallyFigures, 0.0f);
  out[0] = static_cast<float>(epoch);
  for (size_t i = 0; i < kTallyFigures; ++i) split_double(v[i], &out[1 + 2 * i]);
}

EpochTally decode_tally(const std::vector<float>& saved, int epoch) {
  if (saved.size() != 1 + 2 * kTallyFigures || saved[0] != static_cast<float>(epoch)) return {};
  double v[kTallyFigures];
  for (size_t i = 0; i < kTallyFigures; ++i) v[i] = join_floats(&saved[1 + 2 * i]);
  return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
}

void fill_training_metrics(const EpochTally& t, int64_t labels_per_sample, EpochMetrics& m) {
  const double none = std::numeric_limits<double>::quiet_NaN();
  m.train_loss = t.count > 0 ? t.loss_sum / t.count : none;
  m.train_accuracy = t.count > 0 ? t.correct / t.count : none;
  m.time_train_s = t.train_s;
  m.data_wait_s = t.wait_s;
  m.comm_s = t.comm_s;
  m.cpu_s = t.cpu_s;
  m.samples_per_second =
      t.train_s > 0 ? t.count / static_cast<double>(labels_per_sample) / t.train_s : 0.0;
}

}  // namespace hpctrain
