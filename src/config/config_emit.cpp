// config_to_yaml and the enum names: the resolved config written back as YAML, every key
// included, in schema order. Numbers are written in their shortest exact form so that the
// text loads back to an equal Config (yaml-cpp would print 0.05 as 0.050000000000000003).
#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "config/config_reader.hpp"
#include "config/config_schema.hpp"

namespace hpctrain {
namespace {

template <typename E, std::size_t N>
const char* enum_name(const config_schema::EnumName<E> (&names)[N], E value) {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return "invalid";  // only reachable through a cast; callers may be logging an error
}

// Writes a double as a plain scalar (a string the emitter does not reformat).
void number(YAML::Emitter& out, const char* key, double v) {
  out << YAML::Key << key << YAML::Value << config_reader::format_number(v);
}

// The integer layer key `key` of `layer` (every layer key but bias and rate).
int layer_int(const LayerSpec& layer, std::string_view key) {
  if (key == "units") return layer.units;
  if (key == "filters") return layer.filters;
  if (key == "kernel") return layer.kernel;
  if (key == "stride") return layer.stride;
  return layer.padding;
}

}  // namespace

const char* to_string(Device d) { return enum_name(config_schema::kDeviceNames, d); }
const char* to_string(Precision p) { return enum_name(config_schema::kPrecisionNames, p); }
const char* to_string(Layout l) { return enum_name(config_schema::kLayoutNames, l); }
const char* to_string(Strategy s) { return enum_name(config_schema::kStrategyNames, s); }
const char* to_string(AllreduceAlgorithm a) { return enum_name(config_schema::kAlgorithmNames, a); }
const char* to_string(ScheduleType t) { return enum_name(config_schema::kScheduleNames, t); }

std::string config_to_yaml(const Config& c) {
  YAML::Emitter out;
  if (!c.source_file.empty())
    out << YAML::Comment("hpctrain config resolved from " + c.source_file);
  out << YAML::BeginMap;

  out << YAML::Key << "run" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << c.run.name;
  out << YAML::Key << "dir" << YAML::Value << c.run.dir;
  out << YAML::Key << "seed" << YAML::Value << c.run.seed;
  out << YAML::Key << "deterministic" << YAML::Value << c.run.deterministic;
  out << YAML::Key << "threads" << YAML::Value << c.run.threads;
  out << YAML::EndMap;

  out << YAML::Key << "device" << YAML::Value << to_string(c.device);
  out << YAML::Key << "precision" << YAML::Value << to_string(c.precision);
  out << YAML::Key << "layout" << YAML::Value << to_string(c.layout);

  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "train" << YAML::Value << c.data.train;
  out << YAML::Key << "val" << YAML::Value << c.data.val;
  out << YAML::Key << "test" << YAML::Value << c.data.test;
  out << YAML::Key << "prefetch_threads" << YAML::Value << c.data.prefetch_threads;
  out << YAML::Key << "prefetch_depth" << YAML::Value << c.data.prefetch_depth;
  out << YAML::Key << "shuffle" << YAML::Value << c.data.shuffle;
  out << YAML::EndMap;

  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "preset" << YAML::Value << c.model.preset;
  out << YAML::Key << "hidden" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (int width : c.model.hidden) out << width;
  out << YAML::EndSeq;
  out << YAML::Key << "width" << YAML::Value << c.model.width;
  out << YAML::Key << "stem" << YAML::Value << c.model.stem;
  out << YAML::Key << "layers" << YAML::Value;
  if (c.model.layers.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const LayerSpec& layer : c.model.layers) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "type" << YAML::Value << layer.type;
    out << YAML::Key << "name" << YAML::Value << layer.name;
    // An unknown type (only possible in a Config built in code) is written without keys.
    const config_schema::LayerKeys* keys = config_schema::layer_keys(layer.type);
    for (std::string_view key : keys ? keys->keys : std::vector<std::string_view>{}) {
      out << YAML::Key << std::string(key) << YAML::Value;
      if (key == "bias") {
        out << layer.bias;
      } else if (key == "rate") {
        out << config_reader::format_number(layer.rate);
      } else {
        out << layer_int(layer, key);
      }
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "init_from" << YAML::Value << c.model.init_from;
  out << YAML::Key << "freeze" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& name : c.model.freeze) out << name;
  out << YAML::EndSeq;
  out << YAML::EndMap;

  const OptimizerConfig& opt = c.optimizer;
  out << YAML::Key << "optimizer" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << opt.name;
  number(out, "lr", opt.lr);
  if (opt.name == "sgd") {
    number(out, "momentum", opt.momentum);
    out << YAML::Key << "nesterov" << YAML::Value << opt.nesterov;
  } else {
    number(out, "beta1", opt.beta1);
    number(out, "beta2", opt.beta2);
    number(out, "eps", opt.eps);
  }
  number(out, "weight_decay", opt.weight_decay);
  out << YAML::Key << "schedule" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "type" << YAML::Value << to_string(opt.schedule.type);
  number(out, "warmup_epochs", opt.schedule.warmup_epochs);
  out << YAML::Key << "step_epochs" << YAML::Value << opt.schedule.step_epochs;
  number(out, "gamma", opt.schedule.gamma);
  number(out, "min_lr", opt.schedule.min_lr);
  out << YAML::EndMap;
  out << YAML::EndMap;

  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "epochs" << YAML::Value << c.train.epochs;
  out << YAML::Key << "batch_size" << YAML::Value << c.train.batch_size;
  out << YAML::Key << "val_every" << YAML::Value << c.train.val_every;
  number(out, "progress_seconds", c.train.progress_seconds);
  out << YAML::Key << "step_timing" << YAML::Value << c.train.step_timing;
  out << YAML::Key << "loss_scale" << YAML::Value << YAML::BeginMap;
  number(out, "initial", c.train.loss_scale.initial);
  out << YAML::Key << "growth_interval" << YAML::Value << c.train.loss_scale.growth_interval;
  out << YAML::EndMap;
  out << YAML::EndMap;

  out << YAML::Key << "distributed" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "strategy" << YAML::Value << to_string(c.distributed.strategy);
  out << YAML::Key << "algorithm" << YAML::Value << to_string(c.distributed.algorithm);
  out << YAML::Key << "every" << YAML::Value << c.distributed.every;
  out << YAML::Key << "ring_chunk_bytes" << YAML::Value << c.distributed.ring_chunk_bytes;
  out << YAML::Key << "bucket_bytes" << YAML::Value << c.distributed.bucket_bytes;
  number(out, "timeout_seconds", c.distributed.timeout_seconds);
  out << YAML::EndMap;

  out << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dir" << YAML::Value << c.checkpoint.dir;
  out << YAML::Key << "every_steps" << YAML::Value << c.checkpoint.every_steps;
  number(out, "every_seconds", c.checkpoint.every_seconds);
  out << YAML::Key << "at_epoch_end" << YAML::Value << c.checkpoint.at_epoch_end;
  out << YAML::Key << "keep" << YAML::Value << c.checkpoint.keep;
  out << YAML::EndMap;

  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace hpctrain
