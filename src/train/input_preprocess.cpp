#include "train/input_preprocess.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace hpctrain {

Preprocess input_preprocess(const Config& config, const DataSource& train) {
  const DataConfig& d = config.data;
  const DatasetShape& s = train.shape();
  Preprocess p;
  p.flip = d.augment.flip;
  p.crop_padding = d.augment.crop_padding;
  if (d.normalize == "none" && !p.augments()) return p;
  const std::string& cfg = config.source_file;
  if (s.tokens()) {
    throw UsageError(cfg + ": data." + (d.normalize != "none" ? "normalize" : "augment") +
                     ": applies to images, and " + train.path() + " holds tokens");
  }
  if (d.normalize == "none") return p;
  std::vector<double> mean = d.mean, std = d.std;
  std::string from = cfg + ": data.mean and data.std";
  if (d.normalize == "auto") {
    if (s.mean.empty()) {
      throw UsageError(train.path() +
                       ": has no mean and std attributes for data.normalize: auto "
                       "(store them with `hpctrain-data stats FILE...`)");
    }
    mean = s.mean;
    std = s.stddev;
    from = train.path() + ": attributes mean and std";
  }
  const auto channels = static_cast<size_t>(s.c);
  if ((mean.size() != 1 && mean.size() != channels) || std.size() != mean.size()) {
    throw UsageError(from + ": " + std::to_string(mean.size()) + " and " +
                     std::to_string(std.size()) + " values for " + std::to_string(channels) +
                     "-channel images (expected 1 or " + std::to_string(channels) + " each)");
  }
  for (size_t ch = 0; ch < channels; ++ch) {
    const size_t k = mean.size() == 1 ? 0 : ch;
    // In float32, as the inputs are computed: 1/std and the mean must be finite there too.
    const auto m = static_cast<float>(mean[k]), inv = static_cast<float>(1.0 / std[k]);
    if (!(std[k] > 0) || !std::isfinite(m) || !std::isfinite(inv) || !(inv > 0)) {
      char values[96];
      std::snprintf(values, sizeof(values), "channel %zu has mean %g and std %g", ch, mean[k],
                    std[k]);
      throw UsageError(from + ": " + values +
                       " (std must be > 0 and finite, 1/std and the mean finite in float32)");
    }
    p.mean.push_back(m);
    p.inv_std.push_back(inv);
  }
  return p;
}

}  // namespace hpctrain
