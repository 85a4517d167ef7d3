#include "core/installation.hpp"

#include "core/error.hpp"

namespace hpctrain {
namespace fs = std::filesystem;

fs::path program_path() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot tell where this program lies: /proc/self/exe: " + ec.message());
  return self;
}

std::optional<fs::path> prefix_holding(const fs::path& item) {
  const fs::path bin = program_path().parent_path();
  for (const fs::path& dir : {bin, bin.parent_path()}) {
    std::error_code ec;
    if (fs::exists(dir / item, ec)) return dir.lexically_normal();
  }
  return std::nullopt;
}

fs::path share_dir(const fs::path& item) {
  const fs::path share = "share/hpctrain";
  if (const auto prefix = prefix_holding(share / item)) return *prefix / share;
  throw UsageError((share / item).string() + " is not beside " + program_path().string() +
                   " or in the prefix above it: rebuild or reinstall hpctrain");
}

}  // namespace hpctrain
