// Strict scalar parsing and located error messages for config values; see config_reader.hpp.
// Numbers are parsed with std::from_chars over the whole scalar so that nothing is silently
// truncated or rounded ("0.5" is not an integer, "1e400" is not a number).
#include "config/config_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "core/error.hpp"
#include "core/log.hpp"

namespace hpctrain::config_reader {
namespace {

std::string child_path(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (!out.empty()) out += '.';
  out += key;
  return out;
}

// A scalar as an error line shows it: control characters escaped (one_line), so that the
// error stays one line, and cut after 80 bytes.
std::string shown_scalar(const std::string& text) {
  constexpr size_t kMax = 80;
  return one_line(text.substr(0, kMax)) + (text.size() > kMax ? "..." : "");
}

// Where std::from_chars reads a number: after a leading '+', which YAML allows and
// from_chars does not, unless a '-' follows it (the end of the text then: no number).
const char* number_start(const std::string& text) {
  if (text.size() < 2 || text[0] != '+') return text.data();
  return text[1] == '-' ? text.data() + text.size() : text.data() + 1;
}

// The "got" part of a range error: the scalar as written.
std::string got_text(const YAML::Node& node) { return shown_scalar(node.Scalar()); }

}  // namespace

bool Origins::is_overridden(std::string_view path) const {
  for (const std::string& o : overridden_) {
    if (path.size() < o.size() || path.substr(0, o.size()) != o) continue;
    // Whole components only: "train.epochs" covers "train.epochs" but not "train.epochsx".
    if (path.size() == o.size() || path[o.size()] == '.' || path[o.size()] == '[') return true;
  }
  return false;
}

std::string Origins::where(std::string_view path, const YAML::Mark& mark) const {
  if (is_overridden(path)) return "--set " + std::string(path);
  if (mark.line < 0) return file_ + ": " + std::string(path);
  return file_ + ":" + std::to_string(mark.line + 1) + ": " + std::string(path);
}

void Origins::fail(std::string_view path, const YAML::Mark& mark, const std::string& what) const {
  throw UsageError(where(path, mark) + ": " + what);
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "'" + shown_scalar(node.Scalar()) + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

std::string format_number(double v) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
}

std::string read_string(const Origins& origins, const Value& v) {
  if (v.node.IsNull()) return "";
  if (!v.node.IsScalar())
    origins.fail(v.path, v.mark, "expected a string, got " + describe(v.node));
  return v.node.Scalar();
}

bool read_bool(const Origins& origins, const Value& v) {
  bool out = false;
  if (!v.node.IsScalar() || !YAML::convert<bool>::decode(v.node, out)) {
    origins.fail(v.path, v.mark, "expected true or false, got " + describe(v.node));
  }
  return out;
}

int64_t read_int(const Origins& origins, const Value& v, int64_t min, int64_t max) {
  if (!v.node.IsScalar())
    origins.fail(v.path, v.mark, "expected an integer, got " + describe(v.node));
  const std::string& text = v.node.Scalar();
  // from_chars rejects a leading '+', which YAML allows (one sign: "+-1" is not a number).
  const char* first = number_start(text);
  const char* last = text.data() + text.size();
  int64_t x = 0;
  const auto [ptr, ec] = std::from_chars(first, last, x);
  if (ec == std::errc::result_out_of_range && ptr == last) {
    // Beyond 64 bits: out of the key's range, whatever it is (never clamped into it).
    origins.fail(
        v.path, v.mark,
        text[0] == '-'
            ? "expected an integer >= " + std::to_string(min) + ", got " + got_text(v.node)
            : "expected an integer <= " + std::to_string(max) + ", got " + got_text(v.node));
  } else if (ec != std::errc() || ptr != last || first == last) {
    origins.fail(v.path, v.mark, "expected an integer, got " + describe(v.node));
  }
  if (x < min) {
    origins.fail(v.path, v.mark,
                 "expected an integer >= " + std::to_string(min) + ", got " + got_text(v.node));
  }
  if (x > max) {
    origins.fail(v.path, v.mark,
                 "expected an integer <= " + std::to_string(max) + ", got " + got_text(v.node));
  }
  return x;
}

uint64_t read_uint64(const Origins& origins, const Value& v) {
  if (!v.node.IsScalar())
    origins.fail(v.path, v.mark, "expected an integer, got " + describe(v.node));
  const std::string& text = v.node.Scalar();
  if (!text.empty() && text[0] == '-') {
    // Negative seeds are rejected rather than wrapped; still say "integer" if it is one.
    read_int(origins, v, std::numeric_limits<int64_t>::min());
    origins.fail(v.path, v.mark, "expected an integer >= 0, got " + got_text(v.node));
  }
  const char* first = number_start(text);
  const char* last = text.data() + text.size();
  uint64_t x = 0;
  const auto [ptr, ec] = std::from_chars(first, last, x);
  if (ec == std::errc::result_out_of_range && ptr == last) {
    origins.fail(v.path, v.mark,
                 "expected an integer <= " + std::to_string(std::numeric_limits<uint64_t>::max()) +
                     ", got " + got_text(v.node));
  }
  if (ec != std::errc() || ptr != last || first == last) {
    origins.fail(v.path, v.mark, "expected an integer, got " + describe(v.node));
  }
  return x;
}

double read_number(const Origins& origins, const Value& v, const NumberRange& range) {
  if (!v.node.IsScalar())
    origins.fail(v.path, v.mark, "expected a number, got " + describe(v.node));
  const std::string& text = v.node.Scalar();
  const char* first = number_start(text);
  const char* last = text.data() + text.size();
  double x = 0.0;
  const auto [ptr, ec] = std::from_chars(first, last, x);
  if (ec == std::errc::result_out_of_range && ptr == last) {
    // Too large or too small in magnitude for a double (1e400, 1e-400): say so, not "not finite".
    origins.fail(v.path, v.mark,
                 "expected a number a double can hold (0, or a magnitude from 4.9e-324 to "
                 "1.8e308), got " +
                     got_text(v.node));
  }
  if (ec != std::errc() || ptr != last || first == last || !std::isfinite(x)) {
    origins.fail(v.path, v.mark, "expected a finite number, got " + describe(v.node));
  }
  if (!range.contains(x)) {
    origins.fail(v.path, v.mark, "expected a number " + range.text() + ", got " + got_text(v.node));
  }
  // As a float32 a value may leave the range, overflow to inf, or underflow to 0.
  const float as_float = static_cast<float>(x);
  if (range.float32 &&
      (!range.contains(as_float) || !std::isfinite(as_float) || (x != 0 && as_float == 0))) {
    origins.fail(v.path, v.mark,
                 "expected a number " + range.text() + ", got " + got_text(v.node) + ", which is " +
                     format_number(static_cast<float>(x)) + " as the float32 it is used as");
  }
  return x;
}

std::vector<Value> read_list(const Origins& origins, const Value& v, const char* expected) {
  std::vector<Value> out;
  if (v.node.IsNull()) return out;
  if (!v.node.IsSequence()) {
    origins.fail(v.path, v.mark, std::string("expected ") + expected + ", got " + describe(v.node));
  }
  for (std::size_t i = 0; i < v.node.size(); ++i) {
    const YAML::Node element = v.node[i];
    // An element without a usable position (null, or built by --set) reports at the list.
    const YAML::Mark mark = element.IsNull() || element.Mark().line < 0 ? v.mark : element.Mark();
    out.push_back({v.path + "[" + std::to_string(i) + "]", element, mark});
  }
  return out;
}

std::string read_choice(const Origins& origins, const Value& v,
                        const std::vector<std::string_view>& names) {
  if (v.node.IsScalar()) {
    for (std::string_view name : names) {
      if (v.node.Scalar() == name) return v.node.Scalar();
    }
  }
  std::string list;
  for (std::string_view name : names) {
    if (!list.empty()) list += ", ";
    list += name;
  }
  origins.fail(v.path, v.mark, "expected one of " + list + ", got " + describe(v.node));
}

Section::Section(const Origins& origins, const config_schema::KeyNames& names, Value value,
                 std::string_view schema)
    : origins_(&origins), names_(&names), value_(std::move(value)), schema_(schema) {
  const YAML::Node& node = value_.node;
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    origins.fail(value_.path, value_.mark, "expected a map of keys, got " + describe(node));
  }
  const std::vector<std::string_view>* keys = names.section_keys(schema_);
  HT_REQUIRE(keys != nullptr, "config schema has no section '" + schema_ + "'");
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key_node = it->first;
    if (!key_node.IsScalar()) {
      origins.fail(value_.path, key_node.Mark(),
                   "expected plain key names, got " + describe(key_node) + " as a key");
    }
    const std::string key = key_node.Scalar();
    const std::string path = child_path(value_.path, key);
    if (std::find(keys->begin(), keys->end(), key) == keys->end()) {
      origins.fail(path, key_node.Mark(), names.unknown_key_message(schema_, key));
    }
    if (auto previous = find(key)) {
      // yaml-cpp keeps both copies; which one wins would be an accident of its lookup.
      origins.fail(
          path, key_node.Mark(),
          "duplicate key (first given at line " + std::to_string(previous->mark.line + 1) + ")");
    }
    entries_.emplace_back(key, Value{path, it->second, key_node.Mark()});
  }
}

std::optional<Value> Section::find(std::string_view key) const {
  for (const auto& [name, value] : entries_) {
    if (name == key) return value;
  }
  return std::nullopt;
}

Section Section::section(std::string_view key) const {
  const std::string schema = child_path(schema_, key);
  if (auto v = find(key)) return Section(*origins_, *names_, *v, schema);
  return Section(*origins_, *names_,
                 Value{child_path(value_.path, key), YAML::Node(), YAML::Mark::null_mark()},
                 schema);
}

}  // namespace hpctrain::config_reader
