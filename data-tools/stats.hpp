// Per-channel mean and standard deviation of a data set's images, as the network receives
// them (uint8 scaled to [0, 1]; float16 and float32 as stored), for data.normalize: auto.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

struct ChannelStats {
  std::vector<double> mean, std;  // one per channel; std is the population deviation
  int64_t rows = 0;
};

// Over every row of `paths`, read as one data set (the files must agree as for training),
// in blocks of rows: bounded memory. Throws UsageError for token files.
ChannelStats channel_stats(const std::vector<std::string>& paths);

// Writes the root attributes mean and std (float64 [C]) of the data file `path`, replacing
// any earlier ones; the file is changed in place. Throws UsageError naming the file when it
// cannot be opened for writing.
void store_channel_stats(const std::string& path, const ChannelStats& stats);

}  // namespace hpctrain
