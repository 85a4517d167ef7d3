// load_config: reads the YAML file, applies --set overrides to the node tree (so an override
// is checked exactly like the file), then maps each schema section onto the structs of
// config.hpp with range and cross-field checks, and resolves the defaults that depend on
// other keys (run.dir, layer names).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "config/config.hpp"
#include "config/config_reader.hpp"
#include "config/config_schema.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

using config_reader::NumberRange;
using config_reader::Origins;
using config_reader::Section;
using config_reader::Value;
namespace schema = config_schema;

std::string line_of(const std::string& file, const YAML::Mark& mark) {
  return mark.is_null() || mark.line < 0 ? file : file + ":" + std::to_string(mark.line + 1);
}

// The file's top-level map; every way of not getting one is a UsageError naming the file.
YAML::Node load_root(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UsageError(path + ": cannot open config file (it is a directory)");
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw UsageError(path + ": cannot open config file");
  } catch (const YAML::ParserException& e) {
    throw UsageError(line_of(path, e.mark) + ": YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw UsageError(line_of(path, e.mark) + ": YAML error: " + e.msg);
  }
  if (root.IsNull()) {
    throw UsageError(path +
                     ": config file is empty; expected a map of sections (run, device, data, "
                     "model, optimizer, train, distributed)");
  }
  if (!root.IsMap()) {
    throw UsageError(line_of(path, root.Mark()) +
                     ": expected a map of sections at the top level, got " +
                     config_reader::describe(root));
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

// Stores `value` at parts[i..] below `node`, creating absent or empty sections on the way.
void set_in_tree(const Origins& origins, YAML::Node node, const std::vector<std::string>& parts,
                 std::size_t i, const std::string& parent_path, const YAML::Node& value) {
  const std::string path = parent_path.empty() ? parts[i] : parent_path + "." + parts[i];
  if (i + 1 == parts.size()) {
    node[parts[i]] = value;
    return;
  }
  // Fresh handles only: assigning to a bound YAML::Node would rebind what it refers to.
  if (!node[parts[i]].IsDefined() || node[parts[i]].IsNull()) {
    node[parts[i]] = YAML::Node(YAML::NodeType::Map);
  }
  YAML::Node child = node[parts[i]];
  if (!child.IsMap()) {
    origins.fail(path, child.Mark(),
                 "expected a map of keys, got " + config_reader::describe(child));
  }
  set_in_tree(origins, child, parts, i + 1, path, value);
}

// Applies one "a.b=c": the key path must exist in the schema, the value is parsed as YAML.
void apply_override(Origins& origins, YAML::Node& root, const std::string& text) {
  const std::size_t eq = text.find('=');
  const std::string key = text.substr(0, eq);
  const std::vector<std::string> parts = split_path(key);
  bool malformed = eq == std::string::npos;
  for (const std::string& part : parts) malformed = malformed || part.empty();
  if (malformed) throw UsageError("--set " + text + ": expected key.path=value");

  std::string section;  // the schema section holding parts[i]
  for (const std::string& part : parts) {
    const std::string path = section.empty() ? part : section + "." + part;
    const auto* keys = schema::section_keys(section);
    if (keys == nullptr) {
      throw UsageError("--set " + path + ": unknown key ('" + section +
                       "' holds a value, not keys)");
    }
    if (std::find(keys->begin(), keys->end(), part) == keys->end()) {
      throw UsageError("--set " + path + ": " + schema::unknown_key_message(section, part));
    }
    section = path;
  }

  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw UsageError("--set " + key + ": YAML syntax error in value: " + e.msg);
  }
  set_in_tree(origins, root, parts, 0, "", value);
  origins.add_override(key);
}

// A string key that must be given and must not be empty.
void require_nonempty(const Origins& origins, const Section& s, const std::string& key,
                      const std::string& value) {
  if (!value.empty()) return;
  const std::string path = s.path() + "." + key;
  if (auto v = s.find(key)) origins.fail(path, v->mark, "expected a non-empty string, got ''");
  origins.fail(path, YAML::Mark::null_mark(), "required key is missing");
}

void read_run(const Origins& origins, const Section& s, RunConfig& run) {
  s.get("name", run.name);
  s.get("dir", run.dir);
  s.get("seed", run.seed);
  s.get("deterministic", run.deterministic);
  s.get("threads", run.threads, 0);
  require_nonempty(origins, s, "name", run.name);
  if (run.dir.empty()) run.dir = "runs/" + run.name;
}

void read_data(const Origins& origins, const Section& s, DataConfig& data) {
  s.get("train", data.train);
  s.get("val", data.val);
  s.get("test", data.test);
  s.get("prefetch_threads", data.prefetch_threads, 1);
  s.get("prefetch_depth", data.prefetch_depth, 1);
  s.get("shuffle", data.shuffle);
  require_nonempty(origins, s, "train", data.train);
}

// Reads the type-specific keys of one entry into `spec` (whose type is set).
void read_layer_keys(const Origins& origins, const Section& s, const Value& entry,
                     LayerSpec& spec) {
  const schema::LayerKeys& lk = *schema::layer_keys(spec.type);  // type is a known name
  for (std::size_t i = 0; i < lk.required; ++i) {
    if (!s.has(lk.keys[i])) {
      origins.fail(entry.path + "." + std::string(lk.keys[i]), entry.mark,
                   "required key is missing for a " + spec.type + " layer");
    }
  }
  for (std::string_view key : *schema::section_keys(schema::kLayerEntry)) {
    if (key == "type" || key == "name") continue;
    const auto v = s.find(key);
    if (v && !lk.takes(key)) {
      origins.fail(v->path, v->mark,
                   "only " + schema::layer_types_taking(key) + " layers take " + std::string(key));
    }
  }
  // Bounds keep every later size computation far from int overflow.
  constexpr int64_t kMaxWindow = 1024, kMaxChannels = 65536;
  auto read = [&](std::string_view key, int& out, int64_t min, int64_t max) {
    if (const auto v = s.find(key)) out = static_cast<int>(read_int(origins, *v, min, max));
  };
  read("units", spec.units, 1, INT_MAX);
  read("filters", spec.filters, 1, kMaxChannels);
  read("kernel", spec.kernel, 1, kMaxWindow);
  if (spec.type == "maxpool" || spec.type == "avgpool") spec.stride = spec.kernel;
  read("stride", spec.stride, 1, kMaxWindow);
  // A pooling window must hold input cells wherever it sits: padding <= kernel / 2.
  const bool pool = spec.type == "maxpool" || spec.type == "avgpool";
  read("padding", spec.padding, 0, pool ? spec.kernel / 2 : kMaxWindow);
  s.get("bias", spec.bias);
  s.get("rate", spec.rate, NumberRange::at_least(0).below(1));
}

std::vector<LayerSpec> read_layers(const Origins& origins, const Value& list) {
  std::vector<LayerSpec> layers;
  const std::vector<Value> entries = read_list(origins, list, "a list of layers");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Value& entry = entries[i];
    const Section s(origins, entry, schema::kLayerEntry);
    LayerSpec spec;
    if (!s.has("type")) {
      origins.fail(
          entry.path + ".type", entry.mark,
          "required key is missing (one of " + schema::join_names(schema::kLayerTypeNames) + ")");
    }
    s.get_choice("type", spec.type, schema::kLayerTypeNames);
    s.get("name", spec.name);
    read_layer_keys(origins, s, entry, spec);
    // Names identify parameters in checkpoints, so they must be unique.
    if (spec.name.empty()) spec.name = spec.type + std::to_string(i);
    for (std::size_t j = 0; j < layers.size(); ++j) {
      if (layers[j].name != spec.name) continue;
      const auto named = s.find("name");
      origins.fail(entry.path + ".name", named ? named->mark : entry.mark,
                   "duplicate layer name '" + spec.name + "' (also " + list.path + "[" +
                       std::to_string(j) + "])");
    }
    layers.push_back(spec);
  }
  return layers;
}

void read_model(const Origins& origins, const Section& s, ModelConfig& model) {
  s.get_choice("preset", model.preset, schema::kPresetNames);
  const auto hidden = s.find("hidden");
  if (hidden) {
    model.hidden.clear();
    for (const Value& width : read_list(origins, *hidden, "a list of integers")) {
      model.hidden.push_back(static_cast<int>(read_int(origins, width, 1, INT_MAX)));
    }
  }
  s.get("width", model.width, 1);
  s.get_choice("stem", model.stem, schema::kStemNames);
  const auto layers = s.find("layers");
  if (layers) model.layers = read_layers(origins, *layers);
  s.get("init_from", model.init_from);
  if (const auto freeze = s.find("freeze")) {
    model.freeze.clear();
    for (const Value& name : read_list(origins, *freeze, "a list of layer names")) {
      model.freeze.push_back(config_reader::read_string(origins, name));
    }
  }

  // Each preset has its own list; a non-empty list for the other preset would be ignored.
  const std::string preset_note = "(preset is '" + model.preset + "')";
  if (model.preset != "layers" && !model.layers.empty()) {
    origins.fail(layers->path, layers->mark, "only used with model.preset 'layers' " + preset_note);
  }
  // width and stem shape the ResNets only; a changed value elsewhere would be ignored.
  if (model.preset.rfind("resnet", 0) != 0) {
    const ModelConfig defaults;
    const std::string resnet_only = "only used with model.preset 'resnet18' or 'resnet34' ";
    if (const auto v = s.find("width"); v && model.width != defaults.width) {
      origins.fail(v->path, v->mark, resnet_only + preset_note);
    }
    if (const auto v = s.find("stem"); v && model.stem != defaults.stem) {
      origins.fail(v->path, v->mark, resnet_only + preset_note);
    }
  }
  if (model.preset != "mlp" && model.preset != "layers") {
    // The cnn and resnet presets are fixed; an explicit non-empty hidden list would be ignored.
    if (hidden && !model.hidden.empty()) {
      origins.fail(hidden->path, hidden->mark, "only used with model.preset 'mlp' " + preset_note);
    }
    model.hidden.clear();
  } else if (model.preset == "layers") {
    if (!layers)
      origins.fail(s.path() + ".layers", YAML::Mark::null_mark(),
                   "required key is missing when model.preset is 'layers'");
    if (model.layers.empty()) {
      origins.fail(layers->path, layers->mark,
                   "expected a non-empty list of layers, got an empty one");
    }
    if (hidden && !model.hidden.empty()) {
      origins.fail(hidden->path, hidden->mark, "only used with model.preset 'mlp' " + preset_note);
    }
    model.hidden.clear();
  }
}

void read_optimizer(const Origins& origins, const Section& s, OptimizerConfig& opt) {
  s.get_choice("name", opt.name, schema::kOptimizerNames);
  s.get("lr", opt.lr, NumberRange::above(0));
  s.get("momentum", opt.momentum, NumberRange::at_least(0).below(1));
  s.get("nesterov", opt.nesterov);
  s.get("beta1", opt.beta1, NumberRange::at_least(0).below(1));
  s.get("beta2", opt.beta2, NumberRange::at_least(0).below(1));
  s.get("eps", opt.eps, NumberRange::above(0));
  s.get("weight_decay", opt.weight_decay, NumberRange::at_least(0));
  if (opt.nesterov && opt.momentum == 0.0) {
    const auto v = s.find("nesterov");  // present: nesterov defaults to false
    origins.fail(v->path, v->mark, "requires optimizer.momentum > 0");
  }
  // Keys of the other optimizers would be ignored: a value other than the default is an
  // error (the default is accepted, so that --set optimizer.name=adam works on a file
  // written for SGD).
  const OptimizerConfig defaults;
  const bool sgd = opt.name == "sgd";
  const std::string name_note = "(name is '" + opt.name + "')";
  auto only_for = [&](const char* key, bool used, bool is_default, const char* names) {
    if (const auto v = s.find(key); v && !used && !is_default) {
      origins.fail(v->path, v->mark,
                   std::string("only used with optimizer.name ") + names + " " + name_note);
    }
  };
  only_for("momentum", sgd, opt.momentum == defaults.momentum, "'sgd'");
  only_for("nesterov", sgd, opt.nesterov == defaults.nesterov, "'sgd'");
  only_for("beta1", !sgd, opt.beta1 == defaults.beta1, "'adam' or 'adamw'");
  only_for("beta2", !sgd, opt.beta2 == defaults.beta2, "'adam' or 'adamw'");
  only_for("eps", !sgd, opt.eps == defaults.eps, "'adam' or 'adamw'");

  const Section sched = s.section("schedule");
  ScheduleConfig& sc = opt.schedule;
  sched.get("type", sc.type, schema::kScheduleNames);
  sched.get("warmup_epochs", sc.warmup_epochs, NumberRange::at_least(0));
  sched.get("step_epochs", sc.step_epochs, 1);
  sched.get("gamma", sc.gamma, NumberRange::above(0).at_most(1));
  sched.get("min_lr", sc.min_lr, NumberRange::at_least(0));
  if (sc.type == ScheduleType::kCosine && sc.min_lr > opt.lr) {
    const auto v = sched.find("min_lr");  // present: the default 0 is below any lr
    origins.fail(v->path, v->mark,
                 "expected a number <= optimizer.lr (" + config_reader::format_number(opt.lr) +
                     "), got " + v->node.Scalar());
  }
}

void read_train(const Section& s, TrainConfig& train) {
  s.get("epochs", train.epochs, 1);
  s.get("batch_size", train.batch_size, 1);
  s.get("val_every", train.val_every, 1);
  s.get("progress_seconds", train.progress_seconds, NumberRange::at_least(0));
  s.get("step_timing", train.step_timing);
  const Section ls = s.section("loss_scale");
  ls.get("initial", train.loss_scale.initial, NumberRange::at_least(1).at_most(1e30));
  ls.get("growth_interval", train.loss_scale.growth_interval, 1);
}

void read_distributed(const Section& s, DistributedConfig& dist) {
  s.get("strategy", dist.strategy, schema::kStrategyNames);
  s.get("algorithm", dist.algorithm, schema::kAlgorithmNames);
  s.get("every", dist.every, 1);
  s.get("ring_chunk_bytes", dist.ring_chunk_bytes, 64);
  s.get("bucket_bytes", dist.bucket_bytes, 1024);
  s.get("timeout_seconds", dist.timeout_seconds, NumberRange::at_least(0));
}

void read_checkpoint(const Section& s, const RunConfig& run, CheckpointConfig& ckpt) {
  s.get("dir", ckpt.dir);
  s.get("every_steps", ckpt.every_steps, 0);
  s.get("every_seconds", ckpt.every_seconds, NumberRange::at_least(0));
  s.get("at_epoch_end", ckpt.at_epoch_end);
  s.get("keep", ckpt.keep, 1);
  if (ckpt.dir.empty()) ckpt.dir = run.dir + "/checkpoints";
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  YAML::Node root = load_root(path);
  Origins origins(path);
  for (const std::string& o : overrides) apply_override(origins, root, o);

  Config config;
  config.source_file = path;
  const Section top(origins, Value{"", root, root.Mark()}, "");
  read_run(origins, top.section("run"), config.run);
  top.get("device", config.device, schema::kDeviceNames);
  top.get("precision", config.precision, schema::kPrecisionNames);
  top.get("layout", config.layout, schema::kLayoutNames);
  read_data(origins, top.section("data"), config.data);
  read_model(origins, top.section("model"), config.model);
  read_optimizer(origins, top.section("optimizer"), config.optimizer);
  read_train(top.section("train"), config.train);
  read_distributed(top.section("distributed"), config.distributed);
  read_checkpoint(top.section("checkpoint"), config.run, config.checkpoint);
  if (config.precision == Precision::kFp16 && config.distributed.strategy == Strategy::kAverage) {
    const auto v = top.find("precision");
    origins.fail(v->path, v->mark,
                 "fp16 needs distributed.strategy allreduce (its ranks must agree on the loss "
                 "scale); bf16 needs no loss scale and works with average");
  }
  if (config.layout == Layout::kNhwc) {
    const auto v = top.find("layout");
    if (config.precision != Precision::kBf16 && config.precision != Precision::kFp16) {
      origins.fail(v->path, v->mark, "nhwc needs precision bf16 or fp16 (float32 runs are NCHW)");
    }
    if (config.device == Device::kCpu) {
      origins.fail(v->path, v->mark, "nhwc needs a GPU (device cuda or auto); the CPU is NCHW");
    }
  }
  return config;
}

}  // namespace hpctrain
