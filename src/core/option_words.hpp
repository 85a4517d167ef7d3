// The words of an hpctrain command line, read alike by every command: "--name=value" is
// "--name value", and --help / -h ask for help only where they are not an option's value.
#pragma once

#include <string>
#include <vector>

namespace hpctrain {

struct OptionWords {
  std::vector<std::string> words;  // "--name=value" split in two where it is an option
  bool help = false;               // --help or -h stood where an option goes
};

// Reads `args` (after the command word). Every "--name" takes the word after it as its value
// except the flags (--time, --force, --list, --markdown, --help, -h); such a value is kept
// whole, so a prompt or a --set value may hold "-h" or "--x=y". A flag given a value
// ("--force=yes") is a UsageError.
OptionWords read_option_words(const std::vector<std::string>& args);

// Whether a command's words are the help request the dispatcher passes on: "--help" alone.
inline bool is_help(const std::vector<std::string>& args) {
  return args.size() == 1 && args[0] == "--help";
}

}  // namespace hpctrain
