// Out-of-line error helpers.
#include "core/error.hpp"

#include <filesystem>

namespace hpctrain {

void fail_at(const char* file, int line, const std::string& message) {
  throw Error(std::filesystem::path(file).filename().string() + ":" + std::to_string(line) + ": " +
              message);
}

}  // namespace hpctrain
