// Weights from the devices, and auto balance: water-filling the rates into bounded,
// integer batches.
#include "train/balance.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "config/config_reader.hpp"
#include "core/error.hpp"

namespace hpctrain {

std::vector<int64_t> balance_weights(const Config& config,
                                     const std::vector<std::string>& devices) {
  std::vector<int64_t> weights(devices.size(), 1);
  const DistributedConfig& d = config.distributed;
  if (d.balance != "weights") return weights;
  struct Class {
    const char* device;
    double weight;
  };
  for (const Class c : {Class{"cpu", d.cpu_weight}, Class{"cuda", d.cuda_weight}}) {
    if (c.weight != 1.0 && std::find(devices.begin(), devices.end(), c.device) == devices.end()) {
      throw UsageError(config.source_file + ": distributed." + c.device +
                       "_weight: " + config_reader::format_number(c.weight) +
                       " is given, but no rank computes on " + c.device);
    }
  }
  // Integers in proportion: weights up to 1e6 times apart keep six significant digits.
  const double unit = 1e6 / std::max(d.cpu_weight, d.cuda_weight);
  for (size_t r = 0; r < devices.size(); ++r) {
    const double w = devices[r] == "cuda" ? d.cuda_weight : d.cpu_weight;
    weights[r] = std::max<int64_t>(1, std::llround(w * unit));
  }
  return weights;
}

int64_t auto_batch_cap(int64_t total, int ranks) {
  const int64_t share = (total + ranks - 1) / ranks;
  return std::min(2 * share, total - (ranks - 1));
}

std::vector<int64_t> balanced_batches(const std::vector<int64_t>& batches,
                                      const std::vector<double>& rates, int64_t cap) {
  HT_REQUIRE(batches.size() == rates.size() && !batches.empty(), "balanced_batches: sizes");
  const size_t n = batches.size();
  const int64_t total = std::accumulate(batches.begin(), batches.end(), int64_t{0});
  std::vector<double> lo(n), hi(n);
  for (size_t r = 0; r < n; ++r) {
    HT_REQUIRE(rates[r] > 0 && batches[r] >= 1 && batches[r] <= cap, "balanced_batches: inputs");
    lo[r] = static_cast<double>(std::max<int64_t>(1, (batches[r] + 1) / 2));
    hi[r] = static_cast<double>(std::min(cap, 2 * batches[r]));
  }
  // 1. Water-filling: the factor x for which the rates x lambda, each clamped to its
  //    bounds, add up to the total (the current batches are within the bounds, so it exists).
  auto filled = [&](double lambda) {
    double sum = 0;
    for (size_t r = 0; r < n; ++r) sum += std::clamp(lambda * rates[r], lo[r], hi[r]);
    return sum;
  };
  double low = 0, high = 1;
  while (filled(high) < static_cast<double>(total)) high *= 2;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (low + high);
    (filled(mid) < static_cast<double>(total) ? low : high) = mid;
  }
  // 2. Whole samples: floors (they add up to at most the total: the sum of the clamped
  //    values exceeds it by less than one), then one more to the largest fractions below
  //    their bound until the total is met (the bounds add up to at least the total).
  std::vector<int64_t> out(n);
  std::vector<double> fraction(n);
  int64_t given = 0;
  for (size_t r = 0; r < n; ++r) {
    const double x = std::clamp(high * rates[r], lo[r], hi[r]);
    out[r] = static_cast<int64_t>(std::floor(x));
    fraction[r] = x - std::floor(x);
    given += out[r];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return fraction[a] > fraction[b]; });
  for (size_t i = 0; given < total; i = (i + 1) % n) {
    const size_t r = order[i];
    if (static_cast<double>(out[r]) < hi[r]) {
      ++out[r];
      ++given;
    }
  }
  return out;
}

}  // namespace hpctrain
