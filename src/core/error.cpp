// Out-of-line error helpers.
#include "core/error.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

namespace hpctrain {

void exit_after_error(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

namespace {
std::atomic<int> failing_code{-1};
}  // namespace

void begin_failing_exit(int code) noexcept { failing_code.store(code); }

int ending_code(int code) noexcept {
  const int failing = failing_code.load();
  if (failing < 0) return code;
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::fflush(nullptr);
  std::_Exit(failing);
}

void fail_at(const char* file, int line, const std::string& message) {
  throw Error(std::filesystem::path(file).filename().string() + ":" + std::to_string(line) + ": " +
              message);
}

}  // namespace hpctrain
