// One row per key, gathered by walking the schema over a default-constructed config (the
// defaults), then per layer type and per strategy; printed as aligned text or Markdown.
#include "config/config_reference.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "config/config.hpp"
#include "config/config_reader.hpp"
#include "config/config_schema.hpp"

namespace hpctrain {
namespace {

struct Row {
  std::string key, type, default_value, limits, help;
};

struct Table {
  std::string title;  // a section path, "Top level", or a layer type
  std::string help;
  std::vector<Row> rows;
};

std::string join_path(const std::string& section, std::string_view key) {
  return section.empty() ? std::string(key) : section + "." + std::string(key);
}

std::string type_text(const KeyRule& rule, const Catalog& catalog) {
  if (rule.kind == ValueKind::kStrategy) return "one of " + join_names(catalog.strategy_names());
  return rule.type_text();
}

// `text` with its first letter in upper case: a sentence of the reference.
std::string sentence(std::string_view text) {
  std::string out(text);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

// The tables of `decl` and of the sections nested in it, depth first.
void section_tables(const config_schema::SectionDecl& decl, const std::string& path,
                    const void* defaults, const Catalog& catalog, std::vector<Table>& out) {
  Table t{path.empty() ? "Top level" : path, std::string(decl.help), {}};
  for (const config_schema::KeyDecl& k : decl.keys) {
    if (k.nested != nullptr) continue;
    t.rows.push_back({join_path(path, k.name), type_text(k.rule, catalog), k.text(defaults),
                      k.rule.limits_text(path), std::string(k.help)});
  }
  out.push_back(std::move(t));
  for (const config_schema::KeyDecl& k : decl.keys) {
    if (k.nested != nullptr) {
      section_tables(*k.nested, join_path(path, k.name), k.nested_const(defaults), catalog, out);
    }
  }
}

std::vector<Table> key_tables(const Catalog& catalog) {
  const ConfigKeys defaults;
  std::vector<Table> tables;
  section_tables(config_schema::root_section(), "", &defaults, catalog, tables);
  return tables;
}

std::string layer_value_text(const LayerKeyDecl& k) {
  if (!k.default_value) return k.rule.default_from != nullptr ? "(see meaning)" : "(required)";
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, double>) {
          return config_reader::format_number(v);
        } else {
          return std::to_string(v);
        }
      },
      *k.default_value);
}

std::vector<Table> layer_tables(const Catalog& catalog) {
  std::vector<Table> tables;
  for (const LayerTypeDecl* t : catalog.layer_types) {
    Table table{std::string(t->name), std::string(t->help), {}};
    for (const LayerKeyDecl& k : t->keys) {
      std::string limits = k.rule.limits_text();
      if (k.rule.max_from != nullptr) {
        limits += std::string(limits.empty() ? "" : "; ") + "upper bound: see meaning";
      }
      table.rows.push_back({std::string(k.name), type_text(k.rule, catalog), layer_value_text(k),
                            limits, std::string(k.help)});
    }
    tables.push_back(std::move(table));
  }
  return tables;
}

std::string strategy_names(const Catalog& catalog) { return join_names(catalog.strategy_names()); }

// `text` with the characters a Markdown table cell cannot hold escaped.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string code(const std::string& text) {
  if (!text.empty() && text[0] == '(') return text;  // "(required)": not a value
  return "`" + (text.empty() ? "\"\"" : text) + "`";
}

std::string markdown_table(const std::vector<Row>& rows) {
  std::string out = "| key | type | default | limits | meaning |\n|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    out += "| " + code(r.key) + " | " + cell(r.type) + " | " + code(r.default_value) + " | " +
           cell(r.limits) + " | " + cell(r.help) + " |\n";
  }
  return out;
}

}  // namespace

std::string config_reference_text(const Catalog& catalog) {
  std::vector<Row> rows;
  for (const Table& t : key_tables(catalog)) rows.insert(rows.end(), t.rows.begin(), t.rows.end());
  for (const Table& t : layer_tables(catalog)) {
    for (Row r : t.rows) {
      r.key = "model.layers[" + t.title + "]." + r.key;
      rows.push_back(std::move(r));
    }
  }
  size_t key_width = 0, type_width = 0, default_width = 0;
  for (const Row& r : rows) {
    key_width = std::max(key_width, r.key.size());
    type_width = std::max(type_width, r.type.size());
    default_width = std::max(default_width, r.default_value.size() + 2);
  }
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w - s.size() + 2, ' '); };
  std::string out =
      pad("KEY", key_width) + pad("TYPE", type_width) + pad("DEFAULT", default_width) + "MEANING\n";
  for (const Row& r : rows) {
    std::string line = pad(r.key, key_width) + pad(r.type, type_width) +
                       pad(r.default_value.empty() ? "\"\"" : r.default_value, default_width) +
                       r.help;
    if (!r.limits.empty()) line += " [" + r.limits + "]";
    out += line + "\n";
  }
  out += "\ndistributed.strategy: " + strategy_names(catalog) + "\n";
  for (const StrategyDecl* s : catalog.strategies) {
    out += "  " + std::string(s->name) + ": " + std::string(s->help) + "\n";
  }
  return out;
}

std::string config_reference_markdown(const Catalog& catalog) {
  std::string out =
      "# Configuration reference\n"
      "\n"
      "<!-- Generated by `hpctrain config --markdown` from src/config/keys.def, the layer "
      "types\n"
      "     (each registered in its layer's file, listed in src/nn/layer_registry.cpp) and "
      "the exchange\n"
      "     strategies (src/train/exchange_*.cpp, listed in src/train/exchange.cpp). Do not "
      "edit:\n"
      "     the test repo.config_reference fails when this file and the program disagree. -->\n"
      "\n"
      "One YAML file per run. `--set key.path=value` overrides any key, the value in YAML "
      "syntax\n"
      "(`--set model.hidden=[256,128]`); the value of a string or path key that starts with a\n"
      "character YAML reserves (`*`, `&`, `!`, `%`, `@`, `#`, `|`, `>` or a backtick) is that\n"
      "text (`--set 'data.train=*.h5'`). Unknown keys, wrong types, out-of-range values and\n"
      "keys that would be ignored (a key \"only with\" another optimizer, preset, schedule,\n"
      "strategy or precision, set to other than its default) are errors: exit 2 and one line\n"
      "naming the file, the line and the key. A `--set` replaces the file's value, which is\n"
      "then not checked (a section's, by a map: `--set 'optimizer={name: adam, lr: 0.01}'`;\n"
      "by nothing, `--set model=`, it is an error); a key given twice in one mapping of the\n"
      "file is an error with or without `--set`. Paths are used as written: `~` is not\n"
      "expanded, so a path starting with it is an error. The run directory's `config.yaml`\n"
      "holds the resolved config: every key, defaults included, but those of the optimizers\n"
      "not chosen. A file is one YAML document (a second `---` is an error), a quoted\n"
      "string must be closed (one left open would run to the end of the file), and every\n"
      "string is UTF-8 without a NUL character: each an error naming the line. Where YAML\n"
      "aliases share a value, `--set` changes the key it names only.\n";
  for (const Table& t : key_tables(catalog)) {
    if (t.rows.empty()) continue;
    out += "\n## " + t.title + "\n\n" + sentence(t.help) + ".\n\n" + markdown_table(t.rows);
  }
  out +=
      "\n## Layer types\n\n"
      "The entries of `model.layers` (with `model.preset: layers`): `{type: T, name: N, ...}` "
      "with\n"
      "the keys of type T. `name` is optional (type + index) and must be unique: checkpoints "
      "and\n"
      "`model.freeze` name layers by it. A name is letters, digits, `_`, `.` and `-`, and not\n"
      "`classifier` (the head every model ends with).\n";
  for (const Table& t : layer_tables(catalog)) {
    out += "\n### " + t.title + "\n\n" + sentence(t.help) + ".\n";
    if (!t.rows.empty()) {
      out += '\n';
      out += markdown_table(t.rows);
    }
  }
  out +=
      "\n## Exchange strategies\n\nThe values of `distributed.strategy`.\n\n"
      "| strategy | meaning |\n|---|---|\n";
  for (const StrategyDecl* s : catalog.strategies) {
    out += "| `" + std::string(s->name) + "` | " + cell(sentence(s->help)) + " |\n";
  }
  return out;
}

}  // namespace hpctrain
