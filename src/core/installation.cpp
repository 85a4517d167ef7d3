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

fs::path installed_prefix(const fs::path& item) {
  const fs::path bin = program_path().parent_path();
  for (const fs::path& dir : {bin, bin.parent_path()}) {
    std::error_code ec;
    if (fs::exists(dir / item, ec)) return dir.lexically_normal();
  }
  throw UsageError(item.string() + " is not beside " + program_path().string() +
                   " or in the prefix above it: rebuild or reinstall hpctrain");
}

fs::path share_dir(const fs::path& item) {
  const fs::path share = "share/hpctrain";
  return installed_prefix(share / item) / share;
}

}  // namespace hpctrain
