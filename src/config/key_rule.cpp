// The rules' constructors, modifiers and reference text.
#include "config/key_rule.hpp"

#include "config/config_reader.hpp"

namespace hpctrain {

bool NumberRange::contains(double x) const {
  if (min && (min_inclusive ? x < *min : x <= *min)) return false;
  if (max && (max_inclusive ? x > *max : x >= *max)) return false;
  return true;
}

std::string NumberRange::text() const {
  std::string out;
  if (min) out += (min_inclusive ? ">= " : "> ") + config_reader::format_number(*min);
  if (max) {
    if (!out.empty()) out += " and ";
    out += (max_inclusive ? "<= " : "< ") + config_reader::format_number(*max);
  }
  return out;
}

KeyRule KeyRule::only_with(std::string_view key,
                           std::initializer_list<std::string_view> values) const {
  KeyRule r = *this;
  r.used_with = key;
  r.used_values = values;
  return r;
}

KeyRule KeyRule::only_with_top_level(std::string_view key,
                                     std::initializer_list<std::string_view> values) const {
  KeyRule r = only_with(key, values);
  r.used_with_top_level = true;
  return r;
}

std::string KeyRule::used_with_path(std::string_view section) const {
  if (used_with_top_level || section.empty()) return std::string(used_with);
  return std::string(section) + "." + std::string(used_with);
}

KeyRule KeyRule::omitted_unused() const {
  KeyRule r = *this;
  r.omitted_when_unused = true;
  return r;
}

KeyRule KeyRule::required() const {
  KeyRule r = *this;
  r.required_when_used = true;
  return r;
}

KeyRule KeyRule::default_of(int64_t (*f)(const LayerSpec&)) const {
  KeyRule r = *this;
  r.default_from = f;
  return r;
}

KeyRule KeyRule::max_of(int64_t (*f)(const LayerSpec&)) const {
  KeyRule r = *this;
  r.max_from = f;
  return r;
}

bool KeyRule::applies(std::string_view value) const {
  if (used_with.empty()) return true;
  for (std::string_view v : used_values) {
    if (v == value) return true;
  }
  return false;
}

std::string KeyRule::type_text() const {
  switch (kind) {
    case ValueKind::kText:
      return path ? "path" : "string";
    case ValueKind::kFlag:
      return "true or false";
    case ValueKind::kInt:
    case ValueKind::kUint64:
      return "integer";
    case ValueKind::kNumber:
      return "number";
    case ValueKind::kChoice:
      return "one of " + join_names(choices);
    case ValueKind::kStrategy:
      return "one of the exchange strategies";
    case ValueKind::kIntList:
      return "list of integers";
    case ValueKind::kNumberList:
      return "list of numbers";
    case ValueKind::kNameList:
      return "list of strings";
    case ValueKind::kPathList:
      return "path or list of paths (globs allowed)";
    case ValueKind::kLayerList:
      return "list of layers";
  }
  return "";
}

std::string KeyRule::limits_text(std::string_view section) const {
  std::vector<std::string> parts;
  if (nonempty) parts.push_back("not empty");
  if (kind == ValueKind::kInt || kind == ValueKind::kIntList) {
    const bool has_min = min != std::numeric_limits<int64_t>::min();
    const bool has_max = max != std::numeric_limits<int64_t>::max();
    std::string bounds;
    if (has_min && has_max) {
      bounds = std::to_string(min) + " to " + std::to_string(max);
    } else if (has_min) {
      bounds = ">= " + std::to_string(min);
    } else if (has_max) {
      bounds = "<= " + std::to_string(max);
    }
    if (!bounds.empty()) parts.push_back(kind == ValueKind::kIntList ? "each " + bounds : bounds);
  }
  if (kind == ValueKind::kUint64) {
    parts.push_back("0 to " + std::to_string(std::numeric_limits<uint64_t>::max()));
  }
  if (kind == ValueKind::kNumber && !range.text().empty()) parts.push_back(range.text());
  if (kind == ValueKind::kNumberList && !range.text().empty()) {
    parts.push_back("each " + range.text());
  }
  if (!used_with.empty()) {
    parts.push_back("only with " + used_with_path(section) + " " + join_names(used_values));
  }
  if (required_when_used) parts.push_back("required then");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

KeyRule text() { return KeyRule{}; }

KeyRule required_text() {
  KeyRule r;
  r.nonempty = true;
  return r;
}

KeyRule file_path() {
  KeyRule r;
  r.path = true;
  return r;
}

KeyRule flag() {
  KeyRule r;
  r.kind = ValueKind::kFlag;
  return r;
}

KeyRule integer(int64_t min, int64_t max) {
  KeyRule r;
  r.kind = ValueKind::kInt;
  r.min = min;
  r.max = max;
  return r;
}

KeyRule uint64() {
  KeyRule r;
  r.kind = ValueKind::kUint64;
  return r;
}

KeyRule number(const NumberRange& range) {
  KeyRule r;
  r.kind = ValueKind::kNumber;
  r.range = range;
  return r;
}

KeyRule choice(std::initializer_list<std::string_view> names) {
  KeyRule r;
  r.kind = ValueKind::kChoice;
  r.choices = names;
  return r;
}

KeyRule strategy_choice() {
  KeyRule r;
  r.kind = ValueKind::kStrategy;
  return r;
}

KeyRule int_list(int64_t min) {
  KeyRule r = integer(min);
  r.kind = ValueKind::kIntList;
  return r;
}

KeyRule number_list(const NumberRange& range) {
  KeyRule r = number(range);
  r.kind = ValueKind::kNumberList;
  return r;
}

KeyRule name_list(std::string_view noun) {
  KeyRule r;
  r.kind = ValueKind::kNameList;
  r.list_noun = noun;
  return r;
}

KeyRule path_list(bool required) {
  KeyRule r;
  r.kind = ValueKind::kPathList;
  r.nonempty = required;
  return r;
}

KeyRule layer_list() {
  KeyRule r;
  r.kind = ValueKind::kLayerList;
  return r;
}

std::string join_names(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace hpctrain
