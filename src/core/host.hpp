// The name of the machine this process runs on.
#pragma once

#include <unistd.h>

#include <string>

namespace hpctrain {

// gethostname(); "unknown" where it cannot be read.
inline std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace hpctrain
