// The key table behind config validation and the misspelt-key suggestion.
// The YAML key names are exactly the field names of config.hpp.
#include "config/config_schema.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace hpctrain::config_schema {
namespace {

using KeyList = std::vector<std::string_view>;

// Sections in schema order; the top level is "". A key that is also listed here as
// "<section>.<key>" is a nested section, every other key holds a value.
const std::vector<std::pair<std::string_view, KeyList>>& sections() {
  static const std::vector<std::pair<std::string_view, KeyList>> table = {
      {"",
       {"run", "device", "precision", "layout", "data", "model", "optimizer", "train",
        "distributed", "checkpoint"}},
      {"run", {"name", "dir", "seed", "deterministic", "threads"}},
      {"data", {"train", "val", "test", "prefetch_threads", "prefetch_depth", "shuffle"}},
      {"model", {"preset", "hidden", "width", "stem", "layers", "init_from", "freeze"}},
      {kLayerEntry,
       {"type", "name", "units", "filters", "kernel", "stride", "padding", "bias", "rate"}},
      {"optimizer",
       {"name", "lr", "momentum", "nesterov", "beta1", "beta2", "eps", "weight_decay", "schedule"}},
      {"optimizer.schedule", {"type", "warmup_epochs", "step_epochs", "gamma", "min_lr"}},
      {"train",
       {"epochs", "batch_size", "val_every", "progress_seconds", "step_timing", "loss_scale"}},
      {"train.loss_scale", {"initial", "growth_interval"}},
      {"distributed",
       {"strategy", "algorithm", "every", "ring_chunk_bytes", "bucket_bytes", "timeout_seconds"}},
      {"checkpoint", {"dir", "every_steps", "every_seconds", "at_epoch_end", "keep"}},
  };
  return table;
}

const std::vector<LayerKeys>& layer_table() {
  static const std::vector<LayerKeys> table = {
      {"dense", {"units"}, 1},
      {"relu", {}, 0},
      {"conv2d", {"filters", "kernel", "stride", "padding", "bias"}, 2},
      {"maxpool", {"kernel", "stride", "padding"}, 1},
      {"avgpool", {"kernel", "stride", "padding"}, 1},
      {"global_avgpool", {}, 0},
      {"flatten", {}, 0},
      {"batchnorm", {}, 0},
      {"dropout", {"rate"}, 0},
      {"basic_block", {"filters", "stride"}, 1},
  };
  return table;
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

const std::vector<std::string_view>* section_keys(std::string_view section) {
  for (const auto& [name, keys] : sections()) {
    if (name == section) return &keys;
  }
  return nullptr;
}

bool LayerKeys::takes(std::string_view key) const {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

const LayerKeys* layer_keys(std::string_view type) {
  for (const LayerKeys& lk : layer_table()) {
    if (lk.type == type) return &lk;
  }
  return nullptr;
}

std::string layer_types_taking(std::string_view key) {
  std::vector<std::string_view> types;
  for (const LayerKeys& lk : layer_table()) {
    if (lk.takes(key)) types.push_back(lk.type);
  }
  std::string out;
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (i > 0) out += i + 1 == types.size() ? " or " : ", ";
    out += types[i];
  }
  return out;
}

bool is_section(std::string_view path) { return section_keys(path) != nullptr; }

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

std::string unknown_key_message(std::string_view section, std::string_view key) {
  std::string message = "unknown key";
  // 1. The closest key of the same section, if it is close enough.
  if (const KeyList* keys = section_keys(section)) {
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
  for (const auto& [name, keys] : sections()) {
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
