// Shared by the tests of input validation: a call must throw UsageError (exit code 2)
// whose one-line message names every part the user needs (the file, the key, the value).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace hpctrain::test {

// Runs `f`, expecting a UsageError whose message contains every one of `parts`.
inline void expect_usage_error(const std::function<void()>& f,
                               const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no UsageError thrown; expected one mentioning '" << parts[0] << "'";
  } catch (const UsageError& e) {
    for (const std::string& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
    }
  }
}

}  // namespace hpctrain::test
