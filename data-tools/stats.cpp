#include "data-tools/stats.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <system_error>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/sample_type.hpp"
#include "data-tools/progress_note.hpp"
#include "data/dataset_files.hpp"
#include "h5/h5.hpp"

namespace hpctrain {

ChannelStats channel_stats(const std::vector<std::string>& paths) {
  // The stored statistics are what this replaces: a damaged pair must not stop it.
  const std::unique_ptr<DataSource> data = open_data(paths, StoredStats::kIgnore);
  HT_REQUIRE(data != nullptr, "channel_stats: no files");
  const DatasetShape& s = data->shape();
  if (s.tokens()) throw UsageError(data->path() + ": holds tokens; stats are for images");
  const int64_t plane = s.h * s.w;
  const int64_t block = std::max<int64_t>(
      1, (int64_t{64} << 20) / static_cast<int64_t>(s.sample_bytes() + 4 * s.sample_elems()));
  std::vector<uint8_t> bytes(static_cast<size_t>(std::min(block, s.n)) * s.sample_bytes());
  std::vector<float> values(static_cast<size_t>(std::min(block, s.n) * s.sample_elems()));
  std::vector<int32_t> labels(static_cast<size_t>(std::min(block, s.n) * s.labels_per_sample));
  // Sums per block, added to the totals: float32 values summed in double, exact enough for
  // any size a file holds. Each channel's values are taken less its first value (a shift
  // that leaves the variance as it is), so that E[x^2] - E[x]^2 does not cancel: a channel
  // of one value has a std of exactly 0 (it was 5e-8, stored, and exit 0), not rounding.
  std::vector<double> sum(static_cast<size_t>(s.c), 0.0), sum_sq(static_cast<size_t>(s.c), 0.0);
  std::vector<double> shift(static_cast<size_t>(s.c), 0.0);
  ProgressNote note("stats " + data->path(), s.n);
  for (int64_t row = 0; row < s.n; row += block) {
    note.update(row);
    const int64_t n = std::min(block, s.n - row);
    data->read_rows(row, n, bytes.data(), labels.data());
    decode_samples(bytes.data(), s.type, static_cast<size_t>(n * s.sample_elems()), values.data());
    if (row == 0) {
      for (int64_t ch = 0; ch < s.c; ++ch) shift[static_cast<size_t>(ch)] = values[ch * plane];
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t ch = 0; ch < s.c; ++ch) {
        const float* v = values.data() + (i * s.c + ch) * plane;
        const double k = shift[static_cast<size_t>(ch)];
        double a = 0, b = 0;
        for (int64_t j = 0; j < plane; ++j) {
          const double d = static_cast<double>(v[j]) - k;
          a += d;
          b += d * d;
        }
        sum[static_cast<size_t>(ch)] += a;
        sum_sq[static_cast<size_t>(ch)] += b;
      }
    }
  }
  ChannelStats out;
  out.rows = s.n;
  const double count = static_cast<double>(s.n) * static_cast<double>(plane);
  for (int64_t ch = 0; ch < s.c; ++ch) {
    const double d = sum[static_cast<size_t>(ch)] / count;  // the mean less the shift
    const double var = std::max(0.0, sum_sq[static_cast<size_t>(ch)] / count - d * d);
    out.mean.push_back(shift[static_cast<size_t>(ch)] + d);
    out.std.push_back(std::sqrt(var));
  }
  return out;
}

void store_channel_stats(const std::string& path, const ChannelStats& stats) {
  // Into a copy, renamed over the file when complete. Adding attributes grows the file's
  // metadata, and HDF5 writes it back at the flush: a full disk or a kill there, in place,
  // left a file HDF5 could no longer open. Now the file stays as it was (and at worst
  // PATH.tmp is left, removed by the next run).
  std::error_code ec;
  const std::string real = std::filesystem::canonical(path, ec).string();  // a link's target
  if (ec) throw UsageError(path + ": " + ec.message());
  OwnedTemporary temp(real + ".tmp", real);  // removed if anything fails
  temp.create();
  if (!std::filesystem::copy_file(real, temp.path(),
                                  std::filesystem::copy_options::overwrite_existing, ec) ||
      ec) {
    throw Error(path + ": cannot copy to " + temp.path() +
                " to add the statistics: " + ec.message());
  }
  h5_quiet();
  const H5Handle fapl = h5_unlocked_access();
  const hid_t id = H5Fopen(temp.path().c_str(), H5F_ACC_RDWR, fapl.get());
  if (id < 0) throw UsageError(path + ": cannot open a copy for writing (an HDF5 data file?)");
  {
    H5Handle file(id, H5Fclose);
    h5_reading(path, [&] {
      for (const auto& [name, values] :
           {std::pair<const char*, const std::vector<double>*>{"mean", &stats.mean},
            std::pair<const char*, const std::vector<double>*>{"std", &stats.std}}) {
        if (HT_CHECK_H5(H5Aexists(file.get(), name)) > 0) {
          HT_CHECK_H5(H5Adelete(file.get(), name));
        }
        h5_write_doubles(file.get(), name, *values);
      }
      HT_CHECK_H5(H5Fflush(file.get(), H5F_SCOPE_GLOBAL));
    });
  }
  temp.commit();
}

}  // namespace hpctrain
