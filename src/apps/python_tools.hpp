// `hpctrain study`, `hpctrain plot` and `hpctrain scaling`: commands written in Python
// (the hpctrain_tools package, docs/study.md). The program finds the package next to
// itself, so a build tree or an installed prefix works wherever it lies, and replaces
// itself with python3 running the command.
#pragma once

#include <string>
#include <vector>

namespace hpctrain {

// True for the commands this file runs.
bool is_python_tool(const std::string& command);

// Replaces this process with `python3 -m hpctrain_tools COMMAND ARGS...`; returns only by
// throwing (UsageError when the package is missing, Error when python3 cannot start).
[[noreturn]] void exec_python_tool(const std::string& command,
                                   const std::vector<std::string>& args);

}  // namespace hpctrain
