// Typed, strictly checked reads of YAML values for the config loader. Every failure is a
// one-line UsageError naming where the value came from ("FILE:LINE" or "--set"), its key
// path, what was expected and what was found.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config_schema.hpp"
#include "config/key_rule.hpp"

namespace hpctrain::config_reader {

// Knows the config file and which key paths --set overrides replaced, so that an error
// points at the file line or at the command line. Not thread-safe; one per load.
class Origins {
 public:
  explicit Origins(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  // Records that `path` (and everything below it) now comes from a --set override.
  void add_override(std::string path) { overridden_.push_back(std::move(path)); }
  bool is_overridden(std::string_view path) const;

  // "--set PATH" for overridden paths, else "FILE:LINE: PATH" (1-based line), or
  // "FILE: PATH" when the mark has no line (a key that is missing altogether).
  std::string where(std::string_view path, const YAML::Mark& mark) const;

  // Throws UsageError("WHERE: what").
  [[noreturn]] void fail(std::string_view path, const YAML::Mark& mark,
                         const std::string& what) const;

 private:
  std::string file_;
  std::vector<std::string> overridden_;
};

// A value in the tree with the key path and position to report errors at. `mark` is the
// key's position for map entries: yaml-cpp places an empty value on the following line.
struct Value {
  std::string path;  // e.g. "model.layers[1].units"
  YAML::Node node;
  YAML::Mark mark;
};

// The value as text for "got ...": 'abc' for scalars, "nothing", "a list" or "a map".
std::string describe(const YAML::Node& node);

// Shortest decimal text that reads back to exactly `v` (also used by the emitter).
std::string format_number(double v);

std::string read_string(const Origins& origins, const Value& v);  // null reads as ""
bool read_bool(const Origins& origins, const Value& v);
// Decimal integers only: "0.5", "1e3" and "0x10" are errors, never truncated.
int64_t read_int(const Origins& origins, const Value& v, int64_t min,
                 int64_t max = std::numeric_limits<int64_t>::max());
uint64_t read_uint64(const Origins& origins, const Value& v);
double read_number(const Origins& origins, const Value& v, const NumberRange& range);
// The elements of a list (null reads as empty); `expected` names it in the error.
std::vector<Value> read_list(const Origins& origins, const Value& v, const char* expected);
// One of `names` (exact, case-sensitive).
std::string read_choice(const Origins& origins, const Value& v,
                        const std::vector<std::string_view>& names);

// One of the names of enum E (enum_names, config.hpp).
template <typename E>
E read_enum(const Origins& origins, const Value& v) {
  std::vector<std::string_view> list;
  for (const auto& n : enum_names(E{})) list.emplace_back(n.name);
  const std::string chosen = read_choice(origins, v, list);
  for (const auto& n : enum_names(E{})) {
    if (chosen == n.name) return n.value;
  }
  origins.fail(v.path, v.mark, "internal: enum name table is inconsistent");
}

// A map of keys checked against one schema section on construction: unknown keys (with a
// suggestion), duplicate keys and non-map values are errors. Null is an empty section, an
// absent section reads as empty. The get() overloads leave `out` (the default) unchanged
// when the key is absent.
class Section {
 public:
  // `schema`: the section's path in the schema ("optimizer.schedule", "model.layers[]").
  Section(const Origins& origins, const config_schema::KeyNames& names, Value value,
          std::string_view schema);

  const std::string& path() const { return value_.path; }
  const std::string& schema() const { return schema_; }
  std::optional<Value> find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key).has_value(); }
  // The nested section `key` (schema "<schema>.<key>").
  Section section(std::string_view key) const;

 private:
  const Origins* origins_;
  const config_schema::KeyNames* names_;
  Value value_;
  std::string schema_;
  std::vector<std::pair<std::string, Value>> entries_;
};

}  // namespace hpctrain::config_reader
