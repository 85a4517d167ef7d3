// hpctrain-data's commands on existing data files (file_commands.cpp). Each takes the
// arguments after its name, prints its --help, and returns the exit code; bad usage throws
// UsageError.
#pragma once

#include <string>
#include <vector>

namespace hpctrain::data_cli {

int cmd_split(const std::vector<std::string>& argv);
int cmd_shard(const std::vector<std::string>& argv);
int cmd_stats(std::vector<std::string> argv);
int cmd_inspect(const std::vector<std::string>& argv);

}  // namespace hpctrain::data_cli
