// Out-of-line error helpers.
#include "core/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace hpctrain {

void exit_after_error(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

void fail_at(const char* file, int line, const std::string& message) {
  throw Error(std::filesystem::path(file).filename().string() + ":" + std::to_string(line) + ": " +
              message);
}

}  // namespace hpctrain
