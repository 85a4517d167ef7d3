// Where this program's files are: beside the program (a build folder, where the programs lie
// at the top) or in the prefix above it (bin/hpctrain of an installation,
// cmake/install.cmake): share/hpctrain, and lib/hpctrain (the CUDA backend's module). Found
// from the program's own path, so either may be moved.
#pragma once

#include <filesystem>

namespace hpctrain {

// This program's path (/proc/self/exe). Throws Error when it cannot be read.
std::filesystem::path program_path();

// The folder that holds `item` (a relative path, e.g. "lib/hpctrain/x.so"): this program's,
// else the one above it; UsageError "ITEM is not beside PROGRAM or in the prefix above it"
// when neither does.
std::filesystem::path installed_prefix(const std::filesystem::path& item);

// The share/hpctrain folder that holds `item` (a path inside it, e.g. "configs"); throws
// UsageError naming what is missing when neither place has it.
std::filesystem::path share_dir(const std::filesystem::path& item);

}  // namespace hpctrain
