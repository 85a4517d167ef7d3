// load_config: reads the YAML file, applies --set overrides to the node tree (so an override
// is checked exactly like the file), then reads every section through the schema
// (config_schema.hpp: each key's rule, and whether it applies), checks what crosses keys,
// and resolves the defaults that depend on other keys (run.dir, checkpoint.dir).
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/config_reader.hpp"
#include "config/config_schema.hpp"
#include "config/yaml_text.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"

namespace hpctrain {
namespace {

using config_reader::Origins;
using config_reader::Section;
using config_reader::Value;
using config_schema::KeyDecl;
using config_schema::KeyNames;
using config_schema::SectionDecl;

std::string line_of(const std::string& file, const YAML::Mark& mark) {
  return mark.is_null() || mark.line < 0 ? file : file + ":" + std::to_string(mark.line + 1);
}

// yaml-cpp's message for its depth limit says "bad file".
std::string too_deep(const YAML::DeepRecursion& e) {
  return "YAML nested too deep to read (the reader stops at " + std::to_string(e.depth()) +
         " levels)";
}

// The line (from 1) of a "---" that starts a second document in the YAML text, or the file
// `source` when there is no text; 0 when there is none. yaml-cpp reads the first document
// only, and its LoadAll can loop forever on damaged input, so the lines are looked at: a
// "---" at the start of a line after content, or content after a "..." that ends the
// document (a block scalar cannot hold either there).
int second_document_line(const std::string& source, const std::optional<std::string>& text) {
  std::error_code ec;
  if (!text && !std::filesystem::is_regular_file(source, ec)) return 0;
  std::istringstream from_text(text.value_or(""));
  std::ifstream from_file;
  if (!text) from_file.open(source);
  std::istream& in = text ? static_cast<std::istream&>(from_text) : from_file;
  const auto starts_with_marker = [](const std::string& line, const char* marker) {
    return line.rfind(marker, 0) == 0 &&
           (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
  };
  bool content = false, ended = false;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const bool marker = starts_with_marker(line, "---");
    if (marker && content) return number;
    const bool end = starts_with_marker(line, "...");
    const std::string rest = marker || end ? line.substr(3) : line;
    const size_t first = rest.find_first_not_of(" \t\r");
    const bool has_content =
        first != std::string::npos && rest[first] != '#' && (marker || rest[first] != '%');
    if (has_content && ended) return number;
    if (has_content) content = true;
    if (end && content) ended = true;
  }
  return 0;
}

// The document's top-level map; every way of not getting one is a UsageError naming
// `source` (the file, or where the text came from). `text`: the YAML itself, else read from
// the file `source`.
YAML::Node load_root(const std::string& source, const std::optional<std::string>& text) {
  std::error_code ec;
  if (!text && std::filesystem::is_directory(source, ec)) {
    throw UsageError(source + ": cannot open config file (it is a directory)");
  }
  // A data file or a checkpoint given for the config: not "a YAML error". A pipe
  // (<(envsubst < t.yaml), /dev/stdin) is read once, by the YAML reader.
  if (!text && std::filesystem::is_regular_file(source, ec) && is_hdf5_file(source)) {
    throw UsageError(source + ": an HDF5 file (data or a checkpoint), not a YAML config");
  }
  YAML::Node root;
  try {
    root = text ? YAML::Load(*text) : YAML::LoadFile(source);
  } catch (const YAML::BadFile&) {
    throw UsageError(source + ": cannot open config file");
  } catch (const YAML::DeepRecursion& e) {
    throw UsageError(line_of(source, e.mark) + ": " + too_deep(e));
  } catch (const YAML::ParserException& e) {
    throw UsageError(line_of(source, e.mark) + ": YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw UsageError(line_of(source, e.mark) + ": YAML error: " + e.msg);
  }
  {
    // The text again for a file (a pipe is read once, by the YAML reader: its strings are
    // checked, its quotes not).
    std::optional<std::string> read;
    if (!text && std::filesystem::is_regular_file(source, ec)) {
      std::ifstream in(source, std::ios::binary);
      read.emplace(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const std::string* yaml = text ? &*text : read ? &*read : nullptr;
    check_yaml_text(root, yaml, source);
  }
  if (const int line = second_document_line(source, text); line > 0) {
    throw UsageError(source + ":" + std::to_string(line) +
                     ": a second YAML document ('---', or text after '...'): a config is "
                     "one document");
  }
  if (root.IsNull()) {
    throw UsageError(source +
                     ": config file is empty; expected a map of sections (run, device, data, "
                     "model, optimizer, train, distributed)");
  }
  if (!root.IsMap()) {
    throw UsageError(line_of(source, root.Mark()) +
                     ": expected a map of sections at the top level, got " +
                     config_reader::describe(root));
  }
  if (std::as_const(root)["config"] && std::as_const(root)["variants"]) {  // docs/study.md's
    throw UsageError(source +
                     ": a study file (config: and variants:), not a training config: "
                     "run it with hpctrain study");
  }
  return root;
}

std::vector<std::string> split_path(const std::string& key) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// Fails when the map `node` holds `key` more than once. yaml-cpp keeps every copy, finds
// and removes the first only, so a --set would replace one copy and hide the other: a
// duplicate in the file is an error with and without --set.
void check_given_once(const Origins& origins, const YAML::Node& node, const std::string& key,
                      const std::string& path) {
  std::optional<YAML::Mark> first;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar() != key) continue;
    if (first) {
      origins.fail(path, it->first.Mark(),
                   "duplicate key (first given at line " + std::to_string(first->line + 1) + ")");
    }
    first = it->first.Mark();
  }
}

// Fails at the first key given twice in a map anywhere in `node`: the old value a --set
// replaces, which is not read. `seen`: the nodes checked (YAML aliases share them).
void check_no_duplicates(const Origins& origins, const YAML::Node& node, const std::string& path,
                         std::vector<YAML::Node>& seen) {
  if (!node.IsMap() && !node.IsSequence()) return;
  for (const YAML::Node& s : seen) {
    if (s.is(node)) return;
  }
  seen.push_back(node);
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      check_no_duplicates(origins, node[i], path + "[" + std::to_string(i) + "]", seen);
    }
    return;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string key_path = path + "." + it->first.Scalar();
    check_given_once(origins, node, it->first.Scalar(), key_path);
    check_no_duplicates(origins, it->second, key_path, seen);
  }
}

// Stores `value` at parts[i..] below `node`, creating absent or empty sections on the way.
// The value goes into a new entry, and each section on the way is replaced by a copy of it:
// writing into the old ones would change the nodes that YAML aliases of them share
// (`val: *d`, `checkpoint: *run`), not this key alone.
void set_in_tree(const Origins& origins, YAML::Node node, const std::vector<std::string>& parts,
                 std::size_t i, const std::string& parent_path, const YAML::Node& value) {
  const std::string path = parent_path.empty() ? parts[i] : parent_path + "." + parts[i];
  check_given_once(origins, node, parts[i], path);
  if (i + 1 == parts.size()) {
    std::vector<YAML::Node> seen;
    const YAML::Node old = std::as_const(node)[parts[i]];  // const: looks, adds nothing
    if (old.IsDefined()) check_no_duplicates(origins, old, path, seen);
    node.remove(parts[i]);
    node[parts[i]] = value;
    return;
  }
  // Fresh handles only: assigning to a bound YAML::Node would rebind what it refers to.
  if (!node[parts[i]].IsDefined() || node[parts[i]].IsNull()) {
    node[parts[i]] = YAML::Node(YAML::NodeType::Map);
  }
  const YAML::Node shared = std::as_const(node)[parts[i]];
  if (!shared.IsMap()) {
    origins.fail(path, shared.Mark(),
                 "expected a map of keys, got " + config_reader::describe(shared));
  }
  // A fresh map of the same key and value nodes (their marks name the file's lines; every
  // pair kept, a duplicate key too, for the checks that follow).
  YAML::Node copy(YAML::NodeType::Map);
  for (auto it = shared.begin(); it != shared.end(); ++it) copy.force_insert(it->first, it->second);
  node.remove(parts[i]);
  node[parts[i]] = copy;
  set_in_tree(origins, node[parts[i]], parts, i + 1, path, value);
}

// Applies one "a.b=c": the key path must exist in the schema, the value is parsed as YAML.
void apply_override(Origins& origins, const KeyNames& names, YAML::Node& root,
                    const std::string& text) {
  const std::size_t eq = text.find('=');
  const std::string key = text.substr(0, eq);
  const std::vector<std::string> parts = split_path(key);
  bool malformed = eq == std::string::npos;
  for (const std::string& part : parts) malformed = malformed || part.empty();
  if (malformed) throw UsageError("--set " + text + ": expected key.path=value");

  std::string section;  // the schema section holding parts[i]
  const SectionDecl* decl = &config_schema::root_section();
  const KeyDecl* key_decl = nullptr;  // the key's declaration (null: not one of a section)
  for (const std::string& part : parts) {
    const std::string path = section.empty() ? part : section + "." + part;
    const auto* keys = names.section_keys(section);
    if (keys == nullptr) {
      throw UsageError("--set " + path + ": unknown key ('" + section +
                       "' holds a value, not keys)");
    }
    if (std::find(keys->begin(), keys->end(), part) == keys->end()) {
      throw UsageError("--set " + path + ": " + names.unknown_key_message(section, part));
    }
    section = path;
    key_decl = decl != nullptr ? decl->key(part) : nullptr;
    decl = key_decl != nullptr ? key_decl->nested : nullptr;
  }

  // A value starting with a character YAML reserves (an alias, an anchor, a tag, a
  // directive, a comment, a block scalar, '@' and '`') is not a plain scalar: for a key that
  // takes text or paths it is the text itself (--set data.train=*.h5 is the glob).
  const std::string raw = text.substr(eq + 1);
  const bool reserved =
      !raw.empty() && std::string_view("*&!%@`#|>").find(raw[0]) != std::string_view::npos;
  const bool takes_text =
      key_decl != nullptr && key_decl->nested == nullptr &&
      (key_decl->rule.kind == ValueKind::kText || key_decl->rule.kind == ValueKind::kPathList);
  YAML::Node value;
  if (reserved && takes_text) {
    value = YAML::Node(raw);
  } else {
    try {
      value = YAML::Load(raw);
    } catch (const YAML::DeepRecursion& e) {
      throw UsageError("--set " + key + ": " + too_deep(e));
    } catch (const YAML::Exception& e) {
      const std::string hint =
          reserved ? std::string(" (a value starting with '") + raw[0] +
                         "' is YAML syntax; quote it inside the argument: --set \"" + key + "='" +
                         raw + "'\")"
                   : "";
      throw UsageError("--set " + key + ": YAML syntax error in value: " + e.msg + hint);
    }
    check_yaml_text(value, &raw, "--set " + key, /*lines=*/false);
    if (second_document_line("--set", raw) > 0) {
      throw UsageError("--set " + key +
                       ": a second YAML document in the value ('---', or text after '...')");
    }
  }
  // A section replaced by nothing would fall back to every default of its keys, unasked.
  if (key_decl != nullptr && key_decl->nested != nullptr && value.IsNull()) {
    throw UsageError("--set " + key + ": expected a map of keys, got nothing (set one key: --set " +
                     key + ".KEY=VALUE)");
  }
  set_in_tree(origins, root, parts, 0, "", value);
  origins.add_override(key);
}

// "'resnet18' or 'resnet34'"
std::string quoted_alternatives(const std::vector<std::string_view>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += i + 1 == values.size() ? " or " : ", ";
    out += '\'';
    out += values[i];
    out += '\'';
  }
  return out;
}

// Reads the keys of section `decl` from `yaml` into `object` (its struct), nested sections
// included.
void read_section(const config_schema::ReadContext& c, const SectionDecl& decl, const Section& yaml,
                  void* object) {
  for (const KeyDecl& k : decl.keys) {
    if (k.nested != nullptr) {
      read_section(c, *k.nested, yaml.section(k.name), k.nested_object(object));
    } else if (const auto v = yaml.find(k.name)) {
      k.read(c, *v, object);
    }
  }
}

// Once every key is read: the keys that must be given, and those that apply only with some
// value of another key (of the section, or of the top level: in `root`), in section `decl`
// and those nested in it.
void check_section(const config_schema::ReadContext& c, const SectionDecl& decl,
                   const Section& yaml, void* object, const void* root) {
  for (const KeyDecl& k : decl.keys) {
    if (k.nested != nullptr) {
      check_section(c, *k.nested, yaml.section(k.name), k.nested_object(object), root);
      continue;
    }
    const auto v = yaml.find(k.name);
    const std::string path =
        yaml.path().empty() ? std::string(k.name) : yaml.path() + "." + std::string(k.name);
    // A path list's neutral value is the empty list; a string's text is itself.
    const bool empty =
        k.rule.kind == ValueKind::kPathList ? k.neutral(object) : k.text(object).empty();
    if (k.rule.nonempty && empty) {
      c.origins.fail(path, YAML::Mark::null_mark(), "required key is missing");
    }
    if (k.rule.used_with.empty()) continue;
    const std::string selected = config_schema::used_with_value(decl, k.rule, object, root);
    const std::string selector_path = k.rule.used_with_path(yaml.path());
    if (!k.rule.applies(selected)) {
      // A value that would be ignored is an error; the neutral value goes on.
      if (v && !k.neutral(object)) {
        c.origins.fail(v->path, v->mark,
                       "only used with " + selector_path + " " +
                           quoted_alternatives(k.rule.used_values) + " (" +
                           std::string(k.rule.used_with) + " is '" + selected + "')");
      }
      k.reset(object);
    } else if (k.rule.required_when_used) {
      if (!v) {
        c.origins.fail(path, YAML::Mark::null_mark(),
                       "required key is missing when " + selector_path + " is '" + selected + "'");
      }
      if (k.neutral(object)) {
        c.origins.fail(v->path, v->mark,
                       "expected a non-empty " + k.rule.type_text() + ", got an empty one");
      }
    }
  }
}

// The checks that cross keys (beyond "only used with"), and the defaults that depend on
// other keys.
void check_across_keys(const Origins& origins, const Catalog& catalog, const Section& top,
                       Config& config) {
  const Section optimizer = top.section("optimizer");
  const OptimizerConfig& opt = config.optimizer;
  if (opt.nesterov && opt.momentum == 0.0) {
    const auto v = optimizer.find("nesterov");  // present: nesterov defaults to false
    origins.fail(v->path, v->mark, "requires optimizer.momentum > 0");
  }
  if (opt.schedule.type == ScheduleType::kCosine && opt.schedule.min_lr > opt.lr) {
    const auto v = optimizer.section("schedule").find("min_lr");  // present: the default 0
    origins.fail(v->path, v->mark,                                // is below any lr
                 "expected a number <= optimizer.lr (" + config_reader::format_number(opt.lr) +
                     "), got " + v->node.Scalar());
  }
  if (config.precision == Precision::kFp16 &&
      !catalog.strategy(config.distributed.strategy)->identical_replicas) {
    std::vector<std::string_view> with, without;
    for (const StrategyDecl* s : catalog.strategies) {
      (s->identical_replicas ? with : without).push_back(s->name);
    }
    const auto v = top.find("precision");
    origins.fail(v->path, v->mark,
                 "fp16 needs distributed.strategy " + join_names(with) +
                     " (its ranks must agree on the loss scale); bf16 needs no loss scale and "
                     "works with " +
                     join_names(without));
  }
  const bool async = !catalog.strategy(config.distributed.strategy)->lockstep;
  if (async) {
    const Section train = top.section("train");
    const std::string why = "distributed.strategy " + config.distributed.strategy +
                            " hands each worker whole batches of train.batch_size as it goes";
    if (config.train.accumulate_steps > 1) {
      const auto v = train.find("accumulate_steps");
      origins.fail(v->path, v->mark, "must be 1: " + why + " (distributed.push_every sums them)");
    }
    if (config.train.batch_size_is != "per_rank") {
      const auto v = train.find("batch_size_is");
      origins.fail(v->path, v->mark, "must be per_rank: " + why);
    }
    if (config.distributed.balance != "equal") {
      const auto v = top.section("distributed").find("balance");
      origins.fail(v->path, v->mark, "must be equal: " + why + ", so a slower one takes fewer");
    }
    if (config.distributed.algorithm != AllreduceAlgorithm::kAuto) {
      const auto v = top.section("distributed").find("algorithm");
      origins.fail(v->path, v->mark,
                   "must be auto: under distributed.strategy " + config.distributed.strategy +
                       " the workers push to and pull from the parameter servers (no all-reduce)");
    }
    if (config.optimizer.clip_grad_norm > 0) {
      const auto v = top.section("optimizer").find("clip_grad_norm");
      origins.fail(v->path, v->mark,
                   "must be 0: under distributed.strategy " + config.distributed.strategy +
                       " no rank sees the summed gradient of a step to clip");
    }
  }
  if (config.run.deterministic && config.distributed.balance == "auto") {
    const auto v = top.section("distributed").find("balance");  // present: not the default
    origins.fail(v->path, v->mark,
                 "auto shares the batch by measured speed, which differs from run to run: "
                 "run.deterministic needs equal or weights");
  }
  if (config.train.on_nonfinite == "skip_step" && config.distributed.strategy != "allreduce") {
    const auto v = top.section("train").find("on_nonfinite");  // present: not the default
    origins.fail(v->path, v->mark,
                 "skip_step is not available with distributed.strategy " +
                     config.distributed.strategy +
                     (async ? " (the workers' gradients go to the servers unchecked)"
                            : " (the ranks sum no gradients, so they would not skip alike)") +
                     "; use stop");
  }
  if (!config.debug.nonfinite_steps.empty() &&
      (async || config.precision == Precision::kBf16 || config.precision == Precision::kFp16)) {
    const auto v = top.section("debug").find("nonfinite_steps");  // present: not empty
    origins.fail(v->path, v->mark,
                 "needs float32 logits (precision fp32 or tf32) and a strategy other than async");
  }
  if (config.layout == Layout::kNhwc) {
    const auto v = top.find("layout");
    if (config.device == Device::kCpu) {
      origins.fail(v->path, v->mark, "nhwc needs a GPU (device cuda or auto); the CPU is NCHW");
    }
  }
  if (config.train.cuda_graph == "on") {
    const auto v = top.section("train").find("cuda_graph");
    if (config.device == Device::kCpu) {
      origins.fail(v->path, v->mark, "on needs a GPU (device cuda or auto); the CPU runs eagerly");
    }
    if (config.train.accumulate_steps > 1) {
      origins.fail(v->path, v->mark,
                   "on needs train.accumulate_steps 1 (summed micro-batches run eagerly)");
    }
  }
  if (config.rnn == RnnEngine::kCudnn && config.device == Device::kCpu) {
    const auto v = top.find("rnn");
    origins.fail(v->path, v->mark, "cudnn needs a GPU (device cuda or auto); the CPU steps");
  }
  // run.name names a folder under runs/: one path component, so that it cannot reach
  // outside (run.dir is the key for another place).
  const std::string& name = config.run.name;
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;  // a newline from `name: |`
  });
  if (name == "." || name == ".." || name.find('/') != std::string::npos || control) {
    const auto v = top.section("run").find("name");  // present: "run" has no such parts
    origins.fail(v->path, v->mark,
                 "expected a plain name (no '/' or control characters, not '.' or '..'), got '" +
                     one_line(name) + "'; set run.dir to write elsewhere");
  }
  std::set<int> cpu_ranks;
  for (int r : config.cpu_ranks) {
    if (!cpu_ranks.insert(r).second) {
      const auto v = top.find("cpu_ranks");  // present: not empty
      origins.fail(v->path, v->mark, "lists rank " + std::to_string(r) + " twice");
    }
  }
  if (config.run.dir.empty()) config.run.dir = "runs/" + config.run.name;
  if (config.checkpoint.dir.empty()) config.checkpoint.dir = config.run.dir + "/checkpoints";
}

Config load_config_from(const std::string& source, const std::optional<std::string>& text,
                        const std::vector<std::string>& overrides, const Catalog& catalog) {
  YAML::Node root = load_root(source, text);
  Origins origins(source);
  const KeyNames names(catalog);
  for (const std::string& o : overrides) apply_override(origins, names, root, o);

  Config config;
  config.source_file = source;
  const Section top(origins, names, Value{"", root, root.Mark()}, "");
  ConfigKeys* keys = &config;
  const config_schema::ReadContext context{origins, catalog, names};
  read_section(context, config_schema::root_section(), top, keys);
  check_section(context, config_schema::root_section(), top, keys, keys);
  check_across_keys(origins, catalog, top, config);
  return config;
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const Catalog& catalog) {
  return load_config_from(path, std::nullopt, overrides, catalog);
}

Config load_config_text(const std::string& yaml, const std::string& source,
                        const std::vector<std::string>& overrides, const Catalog& catalog) {
  return load_config_from(source, yaml, overrides, catalog);
}

}  // namespace hpctrain
