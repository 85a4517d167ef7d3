// model.layers: reading the list, each entry checked against its layer type in the
// catalog (keys, ranges, defaults, unique names), and writing it back to config.yaml.
#pragma once

#include <yaml-cpp/yaml.h>

#include <vector>

#include "config/config_schema.hpp"
#include "config/layer_spec.hpp"

namespace hpctrain::config_schema {

std::vector<LayerSpec> read_layer_list(const ReadContext& context,
                                       const config_reader::Value& list);

void emit_layer_list(YAML::Emitter& out, const std::vector<LayerSpec>& layers);

}  // namespace hpctrain::config_schema
