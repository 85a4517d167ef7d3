// Small file-system helpers: directories and crash-safe whole-file writes.
#pragma once

#include <string>

namespace hpctrain {

// Creates `dir` and its parents; throws Error naming the path on failure.
void make_directories(const std::string& dir);

// Writes `content` to `path` through a temporary file, fsync and rename, so a
// crash leaves either the old or the new file, never half of one.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace hpctrain
