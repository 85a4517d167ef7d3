// hpctrain-data's argument handling (cli_args.hpp).
#include "data-tools/cli_args.hpp"

#include <charconv>
#include <cstdint>
#include <exception>

#include "core/error.hpp"

namespace hpctrain::cli {

Args parse_args(const std::string& command, const std::vector<std::string>& argv,
                const std::vector<std::string>& known) {
  const std::string hint = " (see hpctrain-data " + command + " --help)";
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      args.help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      args.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    bool is_known = false;
    for (const std::string& k : known) is_known = is_known || k == name;
    if (!is_known) throw UsageError(command + ": unknown option '--" + name + "'" + hint);
    if (!has_value) {
      if (i + 1 >= argv.size()) throw UsageError(command + ": --" + name + " needs a value" + hint);
      value = argv[++i];
    }
    if (!args.options.emplace(name, value).second) {
      throw UsageError(command + ": --" + name + " is given twice" + hint);
    }
  }
  return args;
}

std::string require(const Args& args, const std::string& command, const std::string& name) {
  const auto it = args.options.find(name);
  if (it == args.options.end() || it->second.empty()) {
    throw UsageError(command + ": --" + name + " is required (see hpctrain-data " + command +
                     " --help)");
  }
  return it->second;
}

int64_t int_option(const Args& args, const std::string& name, int64_t fallback, int64_t lo,
                   int64_t hi) {
  const auto it = args.options.find(name);
  if (it == args.options.end()) return fallback;
  const std::string& text = it->second;
  const std::optional<int64_t> parsed = parse_integer(text);
  const int64_t value = parsed.value_or(0);
  if (!parsed || value < lo || value > hi) {
    const std::string expected =
        hi == INT64_MAX && lo == 0
            ? "a non-negative integer (at most 9223372036854775807)"
            : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    throw UsageError("--" + name + ": expected " + expected + ", got '" + text + "'");
  }
  return value;
}

std::optional<double> parse_number(const std::string& text) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return value;
}

std::optional<int64_t> parse_integer(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, err] = std::from_chars(text.data(), end, value);
  if (text.empty() || err != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::vector<std::string> positionals(const Args& args, const std::string& cmd, size_t expected,
                                     const std::string& what) {
  if (args.positional.size() != expected) {
    throw UsageError(cmd + ": expected " + what + " (see hpctrain-data " + cmd + " --help)");
  }
  return args.positional;
}

std::string option_or(const Args& args, const std::string& name, const std::string& fallback) {
  const auto it = args.options.find(name);
  return it != args.options.end() ? it->second : fallback;
}

}  // namespace hpctrain::cli
