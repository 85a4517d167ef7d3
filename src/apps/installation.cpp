#include "apps/installation.hpp"

#include "core/error.hpp"

namespace hpctrain {
namespace fs = std::filesystem;

fs::path program_path() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot tell where this program lies: /proc/self/exe: " + ec.message());
  return self;
}

fs::path share_dir(const fs::path& item) {
  const fs::path self = program_path();
  const fs::path bin = self.parent_path();
  const fs::path share = "share/hpctrain";
  for (const fs::path& dir : {bin / share, bin.parent_path() / share}) {
    std::error_code ec;
    if (fs::exists(dir / item, ec)) return dir.lexically_normal();
  }
  throw UsageError((share / item).string() + " is not beside " + self.string() +
                   " or in the prefix above it: rebuild or reinstall hpctrain");
}

}  // namespace hpctrain
