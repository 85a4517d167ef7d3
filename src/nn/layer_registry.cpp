// The list of layer types. Adding one: its class and registration (its own files), and its
// line here.
#include "nn/layer_registry.hpp"

#include <string>

#include "core/error.hpp"

namespace hpctrain {

extern const LayerType kDenseLayer, kReluLayer, kConv2dLayer, kMaxPoolLayer, kAvgPoolLayer,
    kGlobalAvgPoolLayer, kFlattenLayer, kBatchNormLayer, kDropoutLayer, kBasicBlockLayer,
    kLstmLayer, kGruLayer, kEmbeddingLayer;

const std::vector<const LayerType*>& layer_types() {
  static const std::vector<const LayerType*> list = {
      &kDenseLayer,         &kReluLayer,    &kConv2dLayer,    &kMaxPoolLayer, &kAvgPoolLayer,
      &kGlobalAvgPoolLayer, &kFlattenLayer, &kBatchNormLayer, &kDropoutLayer, &kBasicBlockLayer,
      &kLstmLayer,          &kGruLayer,     &kEmbeddingLayer};
  return list;
}

const LayerType* find_layer_type(std::string_view name) {
  for (const LayerType* t : layer_types()) {
    if (t->decl.name == name) return t;
  }
  return nullptr;
}

std::unique_ptr<Layer> build_layer(const LayerSpec& spec, size_t index) {
  const LayerType* type = find_layer_type(spec.type);
  if (type == nullptr) {
    throw UsageError("model.layers[" + std::to_string(index) + "].type: unknown layer type '" +
                     spec.type + "'");
  }
  LayerSpec complete = spec;
  complete_layer_spec(type->decl, complete);
  return type->build(complete);
}

}  // namespace hpctrain
