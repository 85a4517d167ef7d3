// model.layers entries are checked like a section ("model.layers[]", whose keys are those
// of every layer type), then against their type's declaration: required keys, keys only
// other types take, each value's rule; then the defaults of the keys not given, in the
// declaration's order.
#include "config/layer_list.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "config/config_reader.hpp"

namespace hpctrain::config_schema {
namespace {

using config_reader::Section;
using config_reader::Value;

LayerValue read_layer_value(const config_reader::Origins& origins, const LayerKeyDecl& key,
                            const Value& v, const LayerSpec& spec) {
  const KeyRule& r = key.rule;
  switch (r.kind) {
    case ValueKind::kInt:
      return config_reader::read_int(origins, v, r.min,
                                     r.max_from != nullptr ? r.max_from(spec) : r.max);
    case ValueKind::kNumber:
      return config_reader::read_number(origins, v, r.range);
    case ValueKind::kFlag:
      return config_reader::read_bool(origins, v);
    case ValueKind::kChoice:
      return config_reader::read_choice(origins, v, r.choices);
    default:
      return config_reader::read_string(origins, v);
  }
}

// Reads the keys of one entry into `spec` (whose type is set).
void read_layer_keys(const ReadContext& c, const Section& s, const Value& entry,
                     const LayerTypeDecl& decl, LayerSpec& spec) {
  for (const LayerKeyDecl& k : decl.keys) {
    if (k.required() && !s.has(k.name)) {
      const bool vowel = spec.type.find_first_of("aeiou") == 0;  // "an embedding layer"
      c.origins.fail(entry.path + "." + std::string(k.name), entry.mark,
                     "required key is missing for " + std::string(vowel ? "an " : "a ") +
                         spec.type + " layer");
    }
  }
  for (std::string_view key : *c.names.section_keys(kLayerEntry)) {
    if (key == "type" || key == "name") continue;
    const auto v = s.find(key);
    if (v && decl.key(key) == nullptr) {
      c.origins.fail(
          v->path, v->mark,
          "only " + c.names.layer_types_taking(key) + " layers take " + std::string(key));
    }
  }
  for (const LayerKeyDecl& k : decl.keys) {
    LayerValue value;
    if (const auto v = s.find(k.name)) {
      value = read_layer_value(c.origins, k, *v, spec);
    } else if (k.default_value) {
      value = *k.default_value;
    } else {
      value = k.rule.default_from(spec);
    }
    spec.values.emplace_back(std::string(k.name), std::move(value));
  }
}

}  // namespace

std::vector<LayerSpec> read_layer_list(const ReadContext& c, const Value& list) {
  std::vector<LayerSpec> layers;
  std::vector<YAML::Mark> name_marks;  // of each entry's name (its entry's without one)
  const std::vector<Value> entries = config_reader::read_list(c.origins, list, "a list of layers");
  const std::vector<std::string_view> types = c.catalog.layer_type_names();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Value& entry = entries[i];
    const Section s(c.origins, c.names, entry, kLayerEntry);
    LayerSpec spec;
    const auto type = s.find("type");
    if (!type) {
      c.origins.fail(entry.path + ".type", entry.mark,
                     "required key is missing (one of " + join_names(types) + ")");
    }
    spec.type = config_reader::read_choice(c.origins, *type, types);
    // Ids come from the data: a later embedding would read activations as ids.
    if (spec.type == "embedding" && i > 0) {
      c.origins.fail(entry.path + ".type", type->mark,
                     "embedding must be the first layer (it reads the data's token ids)");
    }
    if (const auto name = s.find("name")) {
      spec.name = config_reader::read_string(c.origins, *name);
      // The architecture line and export tensor names hold it as one word; the head is
      // "classifier".
      const bool word =
          !spec.name.empty() && std::all_of(spec.name.begin(), spec.name.end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' ||
                   ch == '-';
          });
      if (!word || spec.name == "classifier") {
        c.origins.fail(entry.path + ".name", name->mark,
                       "expected letters, digits, '_', '.' and '-', and not 'classifier' (the "
                       "head's name), got '" +
                           spec.name + "'");
      }
    }
    read_layer_keys(c, s, entry, *c.catalog.layer_type(spec.type), spec);
    // Names identify parameters in checkpoints, so they must be unique.
    if (spec.name.empty()) spec.name = spec.type + std::to_string(i);
    const auto named = s.find("name");
    const YAML::Mark name_mark = named ? named->mark : entry.mark;
    for (std::size_t j = 0; j < layers.size(); ++j) {
      if (layers[j].name != spec.name) continue;
      c.origins.fail(entry.path + ".name", name_mark,
                     "duplicate layer name '" + spec.name + "' (also " + list.path + "[" +
                         std::to_string(j) + "])");
    }
    layers.push_back(std::move(spec));
    name_marks.push_back(name_mark);
  }
  // A basic block's parts are named "<block>.conv1", "<block>.bn1", ... (in checkpoints and
  // the export's tensor names): no other layer's name may start with "<block>.".
  for (std::size_t b = 0; b < layers.size(); ++b) {
    if (layers[b].type != "basic_block") continue;
    const std::string prefix = layers[b].name + ".";
    for (std::size_t j = 0; j < layers.size(); ++j) {
      if (layers[j].name.rfind(prefix, 0) != 0) continue;
      c.origins.fail(list.path + "[" + std::to_string(j) + "].name", name_marks[j],
                     "'" + layers[j].name + "' starts with '" + prefix +
                         "', the prefix of the parts of basic_block '" + layers[b].name + "' (" +
                         list.path + "[" + std::to_string(b) + "]: " + prefix + "conv1, " + prefix +
                         "bn1, ...); rename one of them");
    }
  }
  return layers;
}

void emit_layer_list(YAML::Emitter& out, const std::vector<LayerSpec>& layers) {
  if (layers.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const LayerSpec& layer : layers) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "type" << YAML::Value << layer.type;
    out << YAML::Key << "name" << YAML::Value << layer.name;
    for (const auto& [key, value] : layer.values) {
      out << YAML::Key << key << YAML::Value;
      std::visit(
          [&out](const auto& v) {
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>) {
              out << config_reader::format_number(v);
            } else {
              out << v;
            }
          },
          value);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

}  // namespace hpctrain::config_schema
