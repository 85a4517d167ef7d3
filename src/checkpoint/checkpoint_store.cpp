// Directory scanning and retention for checkpoints.
#include "checkpoint/checkpoint_store.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

// "ckpt-000000001234.h5" -> 1234; anything else -> nullopt.
std::optional<int64_t> parse_step(const std::string& filename) {
  constexpr std::string_view kPrefix = "ckpt-", kSuffix = ".h5";
  if (filename.size() <= kPrefix.size() + kSuffix.size()) return std::nullopt;
  if (filename.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  if (filename.compare(filename.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  const std::string digits =
      filename.substr(kPrefix.size(), filename.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof(name), "ckpt-%012lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::vector<CheckpointEntry> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    if (auto step = parse_step(entry.path().filename().string())) {
      out.push_back({*step, entry.path().string()});
    }
  }
  if (ec) throw Error(dir + ": cannot list checkpoints: " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step > b.step; });
  return out;
}

std::optional<LoadedCheckpoint> load_newest_valid(const std::string& dir) {
  for (const CheckpointEntry& e : list_checkpoints(dir)) {
    try {
      return LoadedCheckpoint{e.path, read_checkpoint_file(e.path)};
    } catch (const UsageError& err) {
      log_warn(std::string(err.what()) + "; skipping it for an older checkpoint");
    }
  }
  return std::nullopt;
}

void prune_checkpoints(const std::string& dir, int keep) {
  const std::vector<CheckpointEntry> all = list_checkpoints(dir);
  std::error_code ec;
  for (size_t i = static_cast<size_t>(std::max(keep, 0)); i < all.size(); ++i) {
    if (!fs::remove(all[i].path, ec) && ec) {
      log_warn(all[i].path + ": cannot delete old checkpoint: " + ec.message());
    }
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
        name.rfind("ckpt-", 0) == 0) {
      fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace hpctrain
