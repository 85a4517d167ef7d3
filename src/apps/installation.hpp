// Where this program's files are: share/hpctrain beside the program (a build folder, where
// the programs lie at the top) or in the prefix above it (bin/hpctrain of an installation,
// cmake/install.cmake). Found from the program's own path, so either may be moved.
#pragma once

#include <filesystem>

namespace hpctrain {

// This program's path (/proc/self/exe). Throws Error when it cannot be read.
std::filesystem::path program_path();

// The share/hpctrain folder that holds `item` (a path inside it, e.g. "configs"); throws
// UsageError naming what is missing when neither place has it.
std::filesystem::path share_dir(const std::filesystem::path& item);

}  // namespace hpctrain
