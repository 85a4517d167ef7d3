// The names that modules above config/ define and the loader checks a config against: the
// layer types of model.layers, with their keys (registered in nn/layer_registry.cpp), and
// the exchange strategies of distributed.strategy (train/exchange.cpp). hpctrain's catalog
// is assembled in train/catalog.cpp; config/ depends on neither module.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/key_rule.hpp"
#include "config/layer_spec.hpp"

namespace hpctrain {

// One key a layer type takes.
struct LayerKeyDecl {
  std::string_view name;
  KeyRule rule;  // kInt, kNumber, kFlag, kChoice or kText
  // Absent (and no rule.default_from): the key must be given.
  std::optional<LayerValue> default_value;
  std::string_view help;

  bool required() const { return !default_value && rule.default_from == nullptr; }
};

struct LayerTypeDecl {
  std::string_view name;  // the `type` of a model.layers entry
  std::string_view help;
  std::vector<LayerKeyDecl> keys;  // required keys first

  const LayerKeyDecl* key(std::string_view key_name) const;
};

struct StrategyDecl {
  std::string_view name;  // a value of distributed.strategy
  std::string_view help;
  // The ranks' gradients are summed every step, so every rank holds the same parameters and
  // optimizer state and the ranks agree on a loss scale (precision fp16).
  bool identical_replicas;
  // A checkpoint stores one copy of the parameters and optimizer state (else one per rank).
  bool one_stored_state;
  // The ranks step together, each on its share of a planned global batch (else workers
  // take batches as they go: train.accumulate_steps, batch_size_is and balance then do
  // not apply).
  bool lockstep;
};

struct Catalog {
  std::vector<const LayerTypeDecl*> layer_types;  // in the order the reference lists them
  std::vector<const StrategyDecl*> strategies;

  const LayerTypeDecl* layer_type(std::string_view name) const;  // null if none
  const StrategyDecl* strategy(std::string_view name) const;     // null if none
  std::vector<std::string_view> layer_type_names() const;
  std::vector<std::string_view> strategy_names() const;
};

// Gives `spec` the defaults of the keys of its type it lacks, in the order of `decl` (a
// spec built in code; the loader fills in defaults itself). Error when a required key is
// missing or `spec` holds a key the type does not take.
void complete_layer_spec(const LayerTypeDecl& decl, LayerSpec& spec);

}  // namespace hpctrain
