// Argument handling shared by hpctrain-data's subcommands: "--name value" and
// "--name=value" options checked against the command's list, positionals, and numbers that
// name their option when they are out of range (exit 2 through UsageError).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::cli {

// Parsed "--name value" / "--name=value" options of one subcommand, plus positionals.
struct Args {
  std::map<std::string, std::string> options;
  std::vector<std::string> positional;
  bool help = false;
};

// Throws UsageError naming an option not in `known` or one without a value.
Args parse_args(const std::string& command, const std::vector<std::string>& argv,
                const std::vector<std::string>& known);
// The value of --name; throws UsageError when it is missing or empty.
std::string require(const Args& args, const std::string& command, const std::string& name);
// A whole decimal integer in [lo, hi]; anything else names the option.
int64_t int_option(const Args& args, const std::string& name, int64_t fallback, int64_t lo,
                   int64_t hi);
// The whole of `text` as a decimal number (std::stod's syntax); nullopt for anything else.
std::optional<double> parse_number(const std::string& text);
// The whole of `text` as a decimal integer that int64 holds; nullopt for anything else.
std::optional<int64_t> parse_integer(const std::string& text);
// Returns the positional arguments, which must be exactly `expected` (`what` says which).
std::vector<std::string> positionals(const Args& args, const std::string& cmd, size_t expected,
                                     const std::string& what);
std::string option_or(const Args& args, const std::string& name, const std::string& fallback);

}  // namespace hpctrain::cli
