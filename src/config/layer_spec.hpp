// One entry of model.layers: a layer type, its name, and the values of the keys the type
// takes. Which keys a type takes, their kinds, ranges and defaults are declared once, in
// the type's registration (nn/layer_registry.cpp), not here: the loader checks an entry
// against it and fills in every default, so a loaded spec holds every key of its type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace hpctrain {

// A layer key's value: an integer, a number, a flag or a name.
using LayerValue = std::variant<int64_t, double, bool, std::string>;

struct LayerSpec {
  std::string type{};
  std::string name{};  // unique in the model; the loader makes it type + index when not given
  // (key, value) in the order of the type's registration.
  std::vector<std::pair<std::string, LayerValue>> values{};

  // The value of `key`, or null when the spec has none.
  const LayerValue* find(std::string_view key) const;
  // The value of `key` as an integer, number or flag; Error when the spec has no such key
  // or holds another kind of value there (a registration and its builder disagree).
  int64_t integer(std::string_view key) const;
  double number(std::string_view key) const;
  bool flag(std::string_view key) const;
  // Sets `key`, replacing its value if the spec has one.
  void set(std::string_view key, LayerValue value);
};

}  // namespace hpctrain
