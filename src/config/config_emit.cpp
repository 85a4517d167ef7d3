// config_to_yaml and the enum names: the resolved config written back as YAML through the
// schema (config_schema.hpp), every key but those of the optimizers not chosen, in
// declaration order. Numbers are written in their shortest exact form, so that the text
// loads back to an equal Config.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/config_schema.hpp"

namespace hpctrain {
namespace {

template <typename E>
const char* enum_name(E value) {
  for (const auto& n : enum_names(E{})) {
    if (n.value == value) return n.name;
  }
  return "invalid";  // only reachable through a cast; callers may be logging an error
}

// `root`: the whole config, for the keys that depend on a top-level key.
void emit_section(YAML::Emitter& out, const config_schema::SectionDecl& decl, const void* object,
                  const void* root) {
  out << YAML::BeginMap;
  for (const config_schema::KeyDecl& k : decl.keys) {
    if (k.nested != nullptr) {
      out << YAML::Key << std::string(k.name) << YAML::Value;
      emit_section(out, *k.nested, k.nested_const(object), root);
      continue;
    }
    if (k.rule.omitted_when_unused &&
        !k.rule.applies(config_schema::used_with_value(decl, k.rule, object, root))) {
      continue;  // a key of another optimizer: its value means nothing for this run
    }
    out << YAML::Key << std::string(k.name) << YAML::Value;
    k.emit(out, object);
  }
  out << YAML::EndMap;
}

}  // namespace

const char* to_string(Device d) { return enum_name(d); }
const char* to_string(Precision p) { return enum_name(p); }
const char* to_string(Layout l) { return enum_name(l); }
const char* to_string(RnnEngine e) { return enum_name(e); }
const char* to_string(AllreduceAlgorithm a) { return enum_name(a); }
const char* to_string(ScheduleType t) { return enum_name(t); }

std::string config_to_yaml(const Config& c) {
  YAML::Emitter out;
  if (!c.source_file.empty()) {
    out << YAML::Comment("hpctrain config resolved from " + c.source_file);
  }
  const void* root = static_cast<const ConfigKeys*>(&c);
  emit_section(out, config_schema::root_section(), root, root);
  return std::string(out.c_str()) + "\n";
}

std::string config_first_difference(const std::string& a, const std::string& b) {
  // Each key line of config_to_yaml's block style, as its dotted path and its value.
  const auto keyed = [](const std::string& text) {
    std::vector<std::pair<std::string, std::string>> keys;
    std::vector<std::string> sections;  // by depth (two spaces each)
    size_t begin = 0;
    while (begin < text.size()) {
      size_t end = text.find('\n', begin);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(begin, end - begin);
      begin = end + 1;
      const size_t indent = line.find_first_not_of(' ');
      if (indent == std::string::npos || line[indent] == '#') continue;
      const size_t colon = line.find(':', indent);
      const std::string name = line.substr(indent, colon - indent);
      sections.resize(indent / 2);
      std::string path;
      for (const std::string& s : sections) path += s + ".";
      const std::string value = colon == std::string::npos || colon + 1 >= line.size()
                                    ? std::string()
                                    : line.substr(line.find_first_not_of(' ', colon + 1));
      if (value.empty()) sections.push_back(name);  // a section's line
      keys.emplace_back(path + name, value);
    }
    return keys;
  };
  const auto ka = keyed(a), kb = keyed(b);
  for (size_t i = 0; i < std::max(ka.size(), kb.size()); ++i) {
    if (i < ka.size() && i < kb.size() && ka[i] == kb[i]) continue;
    const std::string key = i < ka.size() ? ka[i].first : kb[i].first;
    const auto value_of = [&](const std::vector<std::pair<std::string, std::string>>& keys) {
      for (const auto& [k, v] : keys) {
        if (k == key) return v;
      }
      return std::string("(none)");
    };
    return key + ": " + value_of(ka) + " against " + value_of(kb);
  }
  return "";
}

std::optional<std::string> config_value(const Config& config, const std::string& path) {
  YAML::Node node = YAML::Load(config_to_yaml(config));
  size_t begin = 0;
  for (;;) {
    const size_t dot = path.find('.', begin);
    const std::string name = path.substr(begin, dot - begin);
    if (!node.IsMap() || name.empty()) return std::nullopt;
    const YAML::Node child = std::as_const(node)[name];
    if (!child) return std::nullopt;
    node.reset(child);  // `node = child` would assign inside the tree
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  if (node.IsScalar()) return node.Scalar();
  YAML::Node flow = YAML::Clone(node);
  flow.SetStyle(YAML::EmitterStyle::Flow);  // nested collections inside follow
  YAML::Emitter out;
  out << flow;
  return std::string(out.c_str());
}

}  // namespace hpctrain
