// What was built: the version (project() in the top CMakeLists.txt, the only place it is
// written) and the git commit, for `hpctrain --version`, `hpctrain-data --version` and
// summary.json. Defined in a file the build writes (cmake/version_info.cmake).
#pragma once

namespace hpctrain {

const char* version();
// The commit's first 12 hex digits, "-dirty" appended when tracked files had changes;
// "unknown" when the sources were not a git checkout.
const char* git_commit();

}  // namespace hpctrain
