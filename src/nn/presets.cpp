// Model presets. The classifier head is always a dense layer named "classifier"
// sized to the data set's class count.
#include "nn/presets.hpp"

#include <string>

#include "core/error.hpp"
#include "nn/dense.hpp"
#include "nn/relu.hpp"

namespace hpctrain {

std::vector<std::unique_ptr<Layer>> build_layers(const ModelConfig& config, int num_classes) {
  std::vector<std::unique_ptr<Layer>> layers;
  if (config.preset == "mlp") {
    for (size_t i = 0; i < config.hidden.size(); ++i) {
      layers.push_back(std::make_unique<Dense>("dense" + std::to_string(i), config.hidden[i]));
      layers.push_back(std::make_unique<Relu>("relu" + std::to_string(i)));
    }
  } else if (config.preset == "layers") {
    for (size_t i = 0; i < config.layers.size(); ++i) {
      const LayerSpec& spec = config.layers[i];
      const std::string name = spec.name.empty() ? spec.type + std::to_string(i) : spec.name;
      if (spec.type == "dense") {
        layers.push_back(std::make_unique<Dense>(name, spec.units));
      } else if (spec.type == "relu") {
        layers.push_back(std::make_unique<Relu>(name));
      } else {
        throw UsageError("model.layers[" + std::to_string(i) + "].type: unknown layer type '" +
                         spec.type + "'");
      }
    }
  } else {
    throw UsageError("model.preset: unknown preset '" + config.preset + "'");
  }
  layers.push_back(std::make_unique<Dense>("classifier", num_classes, Dense::Init::kGlorot));
  return layers;
}

}  // namespace hpctrain
