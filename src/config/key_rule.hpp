// How one key's value is read, checked and described: the rules of config/keys.def and of
// the layer types' keys (config/catalog.hpp). A rule is made by one of the functions at
// the end and refined by its modifiers, e.g. integer(1).only_with("preset", {"mlp"}).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain {

struct LayerSpec;

// Allowed interval of a floating-point value; an absent bound is unlimited. Built as
// NumberRange::at_least(0).below(1) for [0, 1).
struct NumberRange {
  std::optional<double> min;
  bool min_inclusive = true;
  std::optional<double> max;
  bool max_inclusive = true;
  // The value is used as a float32: the range must hold for it rounded to float too
  // (0.99999999 is < 1 as a double but 1.0f).
  bool float32 = false;

  static NumberRange at_least(double v) { return {v, true, std::nullopt, true}; }
  static NumberRange above(double v) { return {v, false, std::nullopt, true}; }
  NumberRange at_most(double v) const { return {min, min_inclusive, v, true, float32}; }
  NumberRange below(double v) const { return {min, min_inclusive, v, false, float32}; }
  NumberRange as_float32() const { return {min, min_inclusive, max, max_inclusive, true}; }

  bool contains(double x) const;
  // ">= 0 and < 1"; empty when unbounded.
  std::string text() const;
};

enum class ValueKind {
  kText,        // a string
  kFlag,        // true or false
  kInt,         // a decimal integer in [min, max]
  kUint64,      // a decimal integer in [0, 2^64)
  kNumber,      // a finite number in `range`
  kChoice,      // one of `choices`
  kStrategy,    // one of the catalog's exchange strategies
  kIntList,     // a list of integers in [min, max]
  kNumberList,  // a list of numbers in `range`
  kNameList,    // a list of strings
  kPathList,    // a file path or glob, or a list of them (NameList; an empty string: none)
  kLayerList    // a list of layers, each checked against its type in the catalog
};

struct KeyRule {
  ValueKind kind = ValueKind::kText;
  bool nonempty = false;  // text: must not be empty, and must be given if the default is
  bool path = false;      // text: a file or folder ('~' is not expanded: an error)
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  NumberRange range;
  std::vector<std::string_view> choices;
  std::string_view list_noun;  // kNameList: what the error calls the list ("layer names")
  // The key applies only while its section's key `used_with` (the top-level key, with
  // `used_with_top_level`) holds one of `used_values`. Otherwise a value other than a
  // neutral one (the default; a list may also be empty) is an error, and the key is reset
  // to the neutral value (a list: empty).
  std::string_view used_with;
  bool used_with_top_level = false;
  std::vector<std::string_view> used_values;
  bool omitted_when_unused = false;  // config.yaml leaves the key out when it does not apply
  bool required_when_used = false;   // it must be given (a list: non-empty) when it applies
  // Layer keys: a default or an upper bound computed from the entry's keys read before it
  // (a pooling stride defaults to the kernel).
  int64_t (*default_from)(const LayerSpec&) = nullptr;
  int64_t (*max_from)(const LayerSpec&) = nullptr;

  KeyRule only_with(std::string_view key, std::initializer_list<std::string_view> values) const;
  // The same for a key of the top level ("precision") from a key in a section.
  KeyRule only_with_top_level(std::string_view key,
                              std::initializer_list<std::string_view> values) const;
  KeyRule omitted_unused() const;
  KeyRule required() const;
  KeyRule default_of(int64_t (*f)(const LayerSpec&)) const;
  KeyRule max_of(int64_t (*f)(const LayerSpec&)) const;

  // Whether `value` of the key `used_with` makes this key apply.
  bool applies(std::string_view value) const;
  // For the reference: "integer", "number", "one of a, b", "list of integers", ...
  std::string type_text() const;
  // The path of the key `used_with` names, for a key of section `section`.
  std::string used_with_path(std::string_view section) const;
  // For the reference: ">= 1", "1 to 1024", "> 0 and <= 1", "only with model.preset mlp"
  // (`section`: the path of the key's section); empty if none.
  std::string limits_text(std::string_view section = "") const;
};

KeyRule text();
KeyRule required_text();  // a non-empty string
KeyRule file_path();      // a string naming a file or folder, or empty
KeyRule flag();
KeyRule integer(int64_t min = std::numeric_limits<int64_t>::min(),
                int64_t max = std::numeric_limits<int64_t>::max());
KeyRule uint64();
KeyRule number(const NumberRange& range);
KeyRule choice(std::initializer_list<std::string_view> names);
// One of the names of enum E's table (enum_names, config.hpp).
template <typename E>
KeyRule choice_of() {
  KeyRule r;
  r.kind = ValueKind::kChoice;
  for (const auto& n : enum_names(E{})) r.choices.emplace_back(n.name);
  return r;
}
KeyRule strategy_choice();
KeyRule int_list(int64_t min);
KeyRule number_list(const NumberRange& range);
KeyRule name_list(std::string_view noun);
// `required`: at least one path.
KeyRule path_list(bool required);
KeyRule layer_list();

// "allreduce, average": the list an error message offers.
std::string join_names(const std::vector<std::string_view>& names);

}  // namespace hpctrain
