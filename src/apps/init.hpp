// hpctrain init: copies an example config and the job script that runs it from this
// installation's share/hpctrain folder into a user's directory.
#pragma once

#include <string>
#include <vector>

namespace hpctrain {

// Runs `hpctrain init` with the arguments after the command name. Throws UsageError for
// bad arguments and for files that exist already (without --force), Error when a file
// cannot be written.
int cmd_init(const std::vector<std::string>& args);

}  // namespace hpctrain
