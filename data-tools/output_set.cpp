// Listing and removing the earlier files of an output set (output_set.hpp).
#include "data-tools/output_set.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"

namespace hpctrain {

std::vector<std::string> earlier_set_files(
    const std::string& prefix, const std::vector<std::string>& outputs, const std::string& input,
    const std::string& what,
    const std::function<bool(const std::string& middle, const std::string& path)>& belongs) {
  namespace fs = std::filesystem;
  const size_t slash = prefix.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : prefix.substr(0, slash + 1);
  const std::string lead = (slash == std::string::npos ? prefix : prefix.substr(slash + 1)) + "-";
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= lead.size() + 3 || name.compare(0, lead.size(), lead) != 0 ||
        name.compare(name.size() - 3, 3, ".h5") != 0) {
      continue;
    }
    const std::string middle = name.substr(lead.size(), name.size() - lead.size() - 3);
    const std::string path = prefix + "-" + middle + ".h5";
    std::error_code type_ec;
    if (std::find(outputs.begin(), outputs.end(), path) != outputs.end() ||
        it->symlink_status(type_ec).type() != fs::file_type::regular || !belongs(middle, path)) {
      continue;
    }
    std::error_code same_ec;
    if (fs::equivalent(input, path, same_ec)) {
      throw UsageError(input + ": the input is " + what + " under this --out-prefix, which " +
                       "this run replaces (removes); choose another --out-prefix");
    }
    found.push_back(path);
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace hpctrain
