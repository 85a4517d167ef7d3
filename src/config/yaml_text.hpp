// Checks of a YAML document's text that yaml-cpp does not make: every string is UTF-8 (a
// name written into summary.json must be), and every quoted string is closed (yaml-cpp
// takes a quote left open as a string that runs to the end of the file, swallowing the
// keys after it).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace hpctrain {

// Throws UsageError "SOURCE:LINE: ..." ("SOURCE: ..." where `lines` is false: a --set value)
// for the first string (key or value) of `root` that is not UTF-8 or holds a NUL, and, where
// `text` (the YAML that `root` was read from) is given, for a quoted string never closed.
void check_yaml_text(const YAML::Node& root, const std::string* text, const std::string& source,
                     bool lines = true);

}  // namespace hpctrain
