// One registration per layer type: its name and the keys a model.layers entry of the type
// takes (the config catalog's LayerTypeDecl: kinds, ranges, defaults, help), and how to
// build the layer from a complete entry. Each layer type's file defines its registration
// next to its class (kDenseLayer in dense.cpp); layer_registry.cpp lists them. The layer
// class itself gives the architecture line (Layer::type(), Layer::attributes()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "config/catalog.hpp"
#include "nn/layer.hpp"

namespace hpctrain {

// Bounds of the size keys of model.layers entries. Each key alone fits an int, but products
// of them need not: a convolution's filter (channels * kernel * kernel) reaches 2^36, so
// sizes are computed in 64 bits and a layer checks its own products (Conv2d::output_dims
// refuses a filter or an output plane past INT_MAX).
inline constexpr int64_t kMaxWindow = 1024, kMaxChannels = 65536;

struct LayerType {
  LayerTypeDecl decl;
  // `spec` holds every key of decl (complete_layer_spec); its type is decl.name.
  std::unique_ptr<Layer> (*build)(const LayerSpec& spec);
};

// Every layer type, in the order the config reference lists them.
const std::vector<const LayerType*>& layer_types();
// Null when there is no type `name`.
const LayerType* find_layer_type(std::string_view name);

// The layer entry `index` of model.layers describes; keys it lacks take their defaults.
// Throws UsageError for an unknown type or a missing required key.
std::unique_ptr<Layer> build_layer(const LayerSpec& spec, size_t index);

}  // namespace hpctrain
