#include "core/option_words.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include "core/error.hpp"

namespace hpctrain {
namespace {

constexpr std::array<std::string_view, 6> kFlags = {"--time",     "--force", "--list",
                                                    "--markdown", "--help",  "-h"};

bool is_flag(const std::string& word) {
  return std::find(kFlags.begin(), kFlags.end(), word) != kFlags.end();
}

}  // namespace

OptionWords read_option_words(const std::vector<std::string>& args) {
  OptionWords out;
  bool value_next = false;  // the word before was an option that takes one
  for (const std::string& word : args) {
    if (value_next) {
      out.words.push_back(word);
      value_next = false;
      continue;
    }
    const size_t eq = word.find('=');
    if (word.rfind("--", 0) == 0 && eq != std::string::npos && eq > 2) {
      // "--help=1" was read as "--help" "1", and named as an unknown option "--help".
      if (is_flag(word.substr(0, eq))) {
        throw UsageError("option " + word.substr(0, eq) + " takes no value, got '" + word + "'");
      }
      out.words.push_back(word.substr(0, eq));
      out.words.push_back(word.substr(eq + 1));
      continue;
    }
    out.help = out.help || word == "--help" || word == "-h";
    value_next = word.rfind("--", 0) == 0 && !is_flag(word);
    out.words.push_back(word);
  }
  return out;
}

}  // namespace hpctrain
