// The config schema as data, made from the declarations of config/keys.def: each section's
// keys with their rules and help, and for each key how to read its value into the struct
// field, write it to config.yaml and show it as text. The loader, the emitter and the
// reference (config_reference.hpp) walk it; none of them names a key, except the checks
// across keys in config_loader.cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/catalog.hpp"
#include "config/key_rule.hpp"

namespace hpctrain::config_reader {
class Origins;
struct Value;
}  // namespace hpctrain::config_reader

namespace hpctrain::config_schema {

// Schema name of the entries of model.layers; they are checked like a section.
inline constexpr std::string_view kLayerEntry = "model.layers[]";

class KeyNames;

// What reading a value needs besides the value: where errors point, and the catalog.
struct ReadContext {
  const config_reader::Origins& origins;
  const Catalog& catalog;
  const KeyNames& names;
};

struct SectionDecl;

// One entry of a section: a key, or a nested section. The operations act on the field in
// an object of the section's struct (passed as `section`).
struct KeyDecl {
  std::string_view name;
  KeyRule rule;
  std::string_view help;
  const SectionDecl* nested = nullptr;  // a nested section (rule and help unused)
  std::function<void*(void* section)> nested_object;
  std::function<const void*(const void* section)> nested_const;
  std::function<void(const ReadContext&, const config_reader::Value&, void* section)> read;
  std::function<void(YAML::Emitter&, const void* section)> emit;
  // The value as a config file would hold it ("0.05", "[192]", "sgd").
  std::function<std::string(const void* section)> text;
  // Whether the value is neutral (the default; a list may also be empty), and the reset to
  // it (a list: empty).
  std::function<bool(const void* section)> neutral;
  std::function<void(void* section)> reset;
};

struct SectionDecl {
  std::string_view help;
  std::vector<KeyDecl> keys;

  const KeyDecl* key(std::string_view name) const;
};

// The top level of a config (struct ConfigKeys).
const SectionDecl& root_section();

// The value, as text, of the key `rule.used_with` names for a key of section `decl`: a key
// of `object` (the section's struct), or with rule.used_with_top_level of `root` (the
// ConfigKeys).
std::string used_with_value(const SectionDecl& decl, const KeyRule& rule, const void* object,
                            const void* root);

// The key names of every section, for validation, --set paths and suggestions: the
// declared sections, and model.layers[] (type, name and the keys of every layer type).
class KeyNames {
 public:
  explicit KeyNames(const Catalog& catalog);

  // The keys of section `path` ("" is the top level, "optimizer.schedule" a nested one) in
  // declaration order; null when `path` is not a section.
  const std::vector<std::string_view>* section_keys(std::string_view path) const;

  // "unknown key" plus, when one is close, " (did you mean 'momentum'?)": a key of the same
  // section within a small edit distance, or else the one section elsewhere holding exactly
  // this key ('optimizer.lr' for train.lr).
  std::string unknown_key_message(std::string_view section, std::string_view key) const;
  // The layer types taking `key`, for an error message: "dense", "conv2d, maxpool or avgpool".
  std::string layer_types_taking(std::string_view key) const;

 private:
  const Catalog& catalog_;
  std::vector<std::pair<std::string, std::vector<std::string_view>>> sections_;
};

// Optimal-string-alignment distance (a transposition counts as one edit), ASCII
// case-insensitive.
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace hpctrain::config_schema
