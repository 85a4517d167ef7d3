// The schema table, made from config/keys.def: a KeyDecl per key whose operations act on
// the key's field through a member pointer, so that the loader and the emitter handle
// every key alike. Then the key names per section and the misspelt-key suggestion.
#include "config/config_schema.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <type_traits>
#include <utility>

#include "config/config.hpp"
#include "config/config_reader.hpp"
#include "config/layer_list.hpp"
#include "core/error.hpp"

namespace hpctrain::config_schema {
namespace {

using config_reader::Value;

// --- Reading a value into its field: one overload per field type. -----------------------

// A path as the program uses it: '~' is the shell's, and taken literally it would name a
// folder '~' in the working directory.
void check_path(const ReadContext& c, const Value& v, const std::string& path) {
  if (!path.empty() && path[0] == '~') {
    c.origins.fail(v.path, v.mark,
                   "'~' is not expanded in a config: write the path in full (in a --set value, "
                   "$HOME/... is expanded by the shell)");
  }
}

void read_value(const ReadContext& c, const KeyRule& r, const Value& v, std::string& out) {
  if (r.kind == ValueKind::kChoice) {
    out = config_reader::read_choice(c.origins, v, r.choices);
  } else if (r.kind == ValueKind::kStrategy) {
    out = config_reader::read_choice(c.origins, v, c.catalog.strategy_names());
  } else {
    out = config_reader::read_string(c.origins, v);
    if (r.nonempty && out.empty()) {
      c.origins.fail(v.path, v.mark, "expected a non-empty string, got ''");
    }
    if (r.path) check_path(c, v, out);
  }
}

void read_value(const ReadContext& c, const KeyRule&, const Value& v, bool& out) {
  out = config_reader::read_bool(c.origins, v);
}

void read_value(const ReadContext& c, const KeyRule& r, const Value& v, int& out) {
  out = static_cast<int>(config_reader::read_int(c.origins, v, r.min, r.max));  // max <= INT_MAX
}

void read_value(const ReadContext& c, const KeyRule& r, const Value& v, int64_t& out) {
  out = config_reader::read_int(c.origins, v, r.min, r.max);
}

void read_value(const ReadContext& c, const KeyRule&, const Value& v, uint64_t& out) {
  out = config_reader::read_uint64(c.origins, v);
}

void read_value(const ReadContext& c, const KeyRule& r, const Value& v, double& out) {
  out = config_reader::read_number(c.origins, v, r.range);
}

template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
void read_value(const ReadContext& c, const KeyRule&, const Value& v, E& out) {
  out = config_reader::read_enum<E>(c.origins, v);
}

void read_value(const ReadContext& c, const KeyRule& r, const Value& v, IntList& out) {
  out.clear();
  for (const Value& e : config_reader::read_list(c.origins, v, "a list of integers")) {
    out.push_back(static_cast<int>(config_reader::read_int(c.origins, e, r.min, r.max)));
  }
}

void read_value(const ReadContext& c, const KeyRule& r, const Value& v, NumberList& out) {
  out.clear();
  for (const Value& e : config_reader::read_list(c.origins, v, "a list of numbers")) {
    out.push_back(config_reader::read_number(c.origins, e, r.range));
  }
}

void read_value(const ReadContext& c, const KeyRule& r, const Value& v, NameList& out) {
  out.clear();
  if (r.kind == ValueKind::kPathList) {
    // One path as a plain string (empty: none), or a list of non-empty paths.
    if (!v.node.IsSequence()) {
      std::string path = config_reader::read_string(c.origins, v);
      if (path.empty() && r.nonempty) {
        c.origins.fail(v.path, v.mark, "expected a path or a list of paths, got ''");
      }
      check_path(c, v, path);
      if (!path.empty()) out.push_back(std::move(path));
      return;
    }
    for (const Value& e : config_reader::read_list(c.origins, v, "a list of paths")) {
      out.push_back(config_reader::read_string(c.origins, e));
      if (out.back().empty()) c.origins.fail(e.path, e.mark, "expected a path, got ''");
      check_path(c, e, out.back());
    }
    if (out.empty() && r.nonempty) c.origins.fail(v.path, v.mark, "expected at least one path");
    return;
  }
  const std::string expected = "a list of " + std::string(r.list_noun);
  for (const Value& e : config_reader::read_list(c.origins, v, expected.c_str())) {
    out.push_back(config_reader::read_string(c.origins, e));
  }
}

void read_value(const ReadContext& c, const KeyRule&, const Value& v, LayerList& out) {
  out = read_layer_list(c, v);
}

// --- Writing a value to config.yaml, and as text. ---------------------------------------

void emit_value(YAML::Emitter& out, const std::string& v) { out << v; }
void emit_value(YAML::Emitter& out, bool v) { out << v; }
void emit_value(YAML::Emitter& out, int v) { out << v; }
void emit_value(YAML::Emitter& out, int64_t v) { out << v; }
void emit_value(YAML::Emitter& out, uint64_t v) { out << v; }
// Shortest exact form, a plain scalar: yaml-cpp would print 0.05 as 0.050000000000000003.
void emit_value(YAML::Emitter& out, double v) { out << config_reader::format_number(v); }
template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
void emit_value(YAML::Emitter& out, E v) {
  out << to_string(v);
}
template <typename T>
void emit_value(YAML::Emitter& out, const std::vector<T>& list) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const T& x : list) out << x;
  out << YAML::EndSeq;
}
void emit_value(YAML::Emitter& out, const LayerList& layers) { emit_layer_list(out, layers); }

std::string value_text(const std::string& v) { return v; }
std::string value_text(bool v) { return v ? "true" : "false"; }
std::string value_text(int v) { return std::to_string(v); }
std::string value_text(int64_t v) { return std::to_string(v); }
std::string value_text(uint64_t v) { return std::to_string(v); }
std::string value_text(double v) { return config_reader::format_number(v); }
template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
std::string value_text(E v) {
  return to_string(v);
}
template <typename T>
std::string value_text(const std::vector<T>& list) {
  std::string out;
  for (const T& x : list) {
    if constexpr (std::is_same_v<T, LayerSpec>) {
      out += (out.empty() ? "" : ", ") + x.name;
    } else {
      out += (out.empty() ? "" : ", ") + value_text(x);
    }
  }
  return "[" + out + "]";
}

// The neutral values of a key that does not apply: its default, and for a list also the
// empty list (what a key that does not apply is reset to: config.yaml holds "hidden: []"
// for the cnn preset, and the file a user wrote for mlp may hold its default [192]).
template <typename T>
bool is_neutral(const T& v, const T& default_value) {
  return v == default_value;
}
template <typename T>
bool is_neutral(const std::vector<T>& v, const std::vector<T>& default_value) {
  if constexpr (std::is_same_v<T, LayerSpec>) {
    return v.empty();  // model.layers defaults to the empty list
  } else {
    return v.empty() || v == default_value;
  }
}
template <typename T>
void make_neutral(T& v, const T& default_value) {
  v = default_value;
}
template <typename T>
void make_neutral(std::vector<T>& v, const std::vector<T>&) {
  v.clear();
}

// --- The table. ---------------------------------------------------------------------------

template <typename S>
const SectionDecl& decl_of();

template <typename S, typename T>
KeyDecl key_decl(std::string_view name, T S::*field, const KeyRule& declared,
                 std::string_view help) {
  KeyRule rule = declared;
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, IntList>) {
    rule.max = std::min<int64_t>(rule.max, INT_MAX);  // the field's range: read and documented
  }
  KeyDecl k;
  k.name = name;
  k.rule = rule;
  k.help = help;
  k.read = [field, rule](const ReadContext& c, const Value& v, void* s) {
    read_value(c, rule, v, static_cast<S*>(s)->*field);
  };
  k.emit = [field, rule](YAML::Emitter& out, const void* s) {
    const T& value = static_cast<const S*>(s)->*field;
    if constexpr (std::is_same_v<T, NameList>) {
      // A path list of at most one path reads back from a plain string ("": none).
      if (rule.kind == ValueKind::kPathList && value.size() <= 1) {
        out << (value.empty() ? std::string() : value.front());
        return;
      }
    }
    emit_value(out, value);
  };
  k.text = [field](const void* s) { return value_text(static_cast<const S*>(s)->*field); };
  k.neutral = [field](const void* s) {
    return is_neutral(static_cast<const S*>(s)->*field, S{}.*field);
  };
  k.reset = [field](void* s) { make_neutral(static_cast<S*>(s)->*field, S{}.*field); };
  return k;
}

template <typename S, typename Nested>
KeyDecl nested_decl(std::string_view name, Nested S::*field) {
  KeyDecl k;
  k.name = name;
  k.nested = &decl_of<Nested>();
  k.nested_object = [field](void* s) -> void* { return &(static_cast<S*>(s)->*field); };
  k.nested_const = [field](const void* s) -> const void* {
    return &(static_cast<const S*>(s)->*field);
  };
  return k;
}

#define HT_SECTION(Struct, help)         \
  template <>                            \
  const SectionDecl& decl_of<Struct>() { \
    using Self = Struct;                 \
    static const SectionDecl decl = { help, {
#define HT_KEY(Type, name, default_value, rule, help) key_decl(#name, &Self::name, rule, help),
#define HT_SUBSECTION(Struct, name) nested_decl(#name, &Self::name),
#define HT_END_SECTION(Struct) \
  }                            \
  }                            \
  ;                            \
  return decl;                 \
  }
#include "config/keys.def"
#undef HT_SECTION
#undef HT_KEY
#undef HT_SUBSECTION
#undef HT_END_SECTION

// --- Key names and suggestions. -----------------------------------------------------------

void add_sections(const SectionDecl& decl, const std::string& path,
                  std::vector<std::pair<std::string, std::vector<std::string_view>>>& out) {
  std::vector<std::string_view> keys;
  for (const KeyDecl& k : decl.keys) keys.push_back(k.name);
  out.emplace_back(path, std::move(keys));
  for (const KeyDecl& k : decl.keys) {
    if (k.nested != nullptr)
      add_sections(*k.nested, path.empty() ? std::string(k.name) : path + "." + std::string(k.name),
                   out);
  }
}

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string join_path(std::string_view section, std::string_view key) {
  std::string out(section);
  if (!out.empty()) out += '.';
  out += key;
  return out;
}

// How far a typo may be from a key and still be suggested: a third of the key's length,
// at least one edit and at most two, so that "x" never turns into "lr".
std::size_t max_suggest_distance(std::string_view key) {
  return std::clamp<std::size_t>(key.size() / 3, 1, 2);
}

}  // namespace

const KeyDecl* SectionDecl::key(std::string_view name) const {
  for (const KeyDecl& k : keys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

const SectionDecl& root_section() { return decl_of<ConfigKeys>(); }

std::string used_with_value(const SectionDecl& decl, const KeyRule& rule, const void* object,
                            const void* root) {
  const bool top = rule.used_with_top_level;
  const KeyDecl* selector = (top ? root_section() : decl).key(rule.used_with);
  HT_REQUIRE(selector != nullptr && selector->nested == nullptr,
             "config schema: no key '" + std::string(rule.used_with) + "' to depend on");
  return selector->text(top ? root : object);
}

KeyNames::KeyNames(const Catalog& catalog) : catalog_(catalog) {
  add_sections(root_section(), "", sections_);
  std::vector<std::string_view> entry = {"type", "name"};
  for (const LayerTypeDecl* t : catalog_.layer_types) {
    for (const LayerKeyDecl& k : t->keys) {
      if (std::find(entry.begin(), entry.end(), k.name) == entry.end()) entry.push_back(k.name);
    }
  }
  sections_.emplace_back(std::string(kLayerEntry), std::move(entry));
}

const std::vector<std::string_view>* KeyNames::section_keys(std::string_view path) const {
  for (const auto& [name, keys] : sections_) {
    if (name == path) return &keys;
  }
  return nullptr;
}

std::string KeyNames::layer_types_taking(std::string_view key) const {
  std::vector<std::string_view> types;
  for (const LayerTypeDecl* t : catalog_.layer_types) {
    if (t->key(key) != nullptr) types.push_back(t->name);
  }
  std::string out;
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (i > 0) out += i + 1 == types.size() ? " or " : ", ";
    out += types[i];
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j] = distance between the first i chars of a and the first j chars of b.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string KeyNames::unknown_key_message(std::string_view section, std::string_view key) const {
  if (key == "<<") {  // yaml-cpp reads a merge key as a key like any other
    return "a YAML merge key, which the config reader does not resolve: give the keys, or "
           "an alias (*name) for a whole section";
  }
  std::string message = "unknown key";
  // 1. The closest key of the same section, if it is close enough.
  if (const auto* keys = section_keys(section)) {
    std::string_view best;
    std::size_t best_distance = 0;
    for (std::string_view candidate : *keys) {
      const std::size_t d = edit_distance(key, candidate);
      if (d <= max_suggest_distance(candidate) && (best.empty() || d < best_distance)) {
        best = candidate;
        best_distance = d;
      }
    }
    if (!best.empty()) return message + " (did you mean '" + std::string(best) + "'?)";
  }
  // 2. A key put in the wrong section: suggest the full path when exactly one section has it.
  std::string elsewhere;
  int matches = 0;
  for (const auto& [name, keys] : sections_) {
    if (name == section || name == kLayerEntry) continue;
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      elsewhere = join_path(name, key);
      ++matches;
    }
  }
  if (matches == 1) message += " (did you mean '" + elsewhere + "'?)";
  return message;
}

}  // namespace hpctrain::config_schema
