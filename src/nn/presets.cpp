// Model presets. The classifier head is always a dense layer named "classifier"
// sized to the data set's class count.
#include "nn/presets.hpp"

#include <string>

#include "core/error.hpp"
#include "nn/avgpool2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/dense.hpp"
#include "nn/flatten.hpp"
#include "nn/global_avgpool.hpp"
#include "nn/maxpool2d.hpp"
#include "nn/relu.hpp"

namespace hpctrain {
namespace {

Conv2d::Options conv_options(const LayerSpec& spec) {
  Conv2d::Options o;
  o.filters = spec.filters;
  o.kernel = spec.kernel;
  o.stride = spec.stride;
  o.padding = spec.padding;
  o.bias = spec.bias;
  return o;
}

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& name, size_t index) {
  if (spec.type == "dense") return std::make_unique<Dense>(name, spec.units);
  if (spec.type == "relu") return std::make_unique<Relu>(name);
  if (spec.type == "conv2d") return std::make_unique<Conv2d>(name, conv_options(spec));
  if (spec.type == "maxpool") {
    return std::make_unique<MaxPool2d>(name, spec.kernel, spec.stride, spec.padding);
  }
  if (spec.type == "avgpool") {
    return std::make_unique<AvgPool2d>(name, spec.kernel, spec.stride, spec.padding);
  }
  if (spec.type == "global_avgpool") return std::make_unique<GlobalAvgPool>(name);
  if (spec.type == "flatten") return std::make_unique<Flatten>(name);
  throw UsageError("model.layers[" + std::to_string(index) + "].type: unknown layer type '" +
                   spec.type + "'");
}

// The cnn preset: two 3x3 "same" convolutions with ReLU and 2x2 max pooling, then a dense
// layer of 128 (28x28 inputs: 32x14x14 -> 64x7x7 -> 128 -> classes).
void add_cnn(std::vector<std::unique_ptr<Layer>>& layers) {
  const int filters[] = {32, 64};
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    layers.push_back(std::make_unique<Conv2d>("conv" + n, Conv2d::Options{filters[i], 3, 1, 1}));
    layers.push_back(std::make_unique<Relu>("relu" + n));
    layers.push_back(std::make_unique<MaxPool2d>("pool" + n, 2, 2));
  }
  layers.push_back(std::make_unique<Flatten>("flatten"));
  layers.push_back(std::make_unique<Dense>("dense0", 128));
  layers.push_back(std::make_unique<Relu>("relu2"));
}

}  // namespace

std::vector<std::unique_ptr<Layer>> build_layers(const ModelConfig& config, int num_classes) {
  std::vector<std::unique_ptr<Layer>> layers;
  if (config.preset == "mlp") {
    for (size_t i = 0; i < config.hidden.size(); ++i) {
      layers.push_back(std::make_unique<Dense>("dense" + std::to_string(i), config.hidden[i]));
      layers.push_back(std::make_unique<Relu>("relu" + std::to_string(i)));
    }
  } else if (config.preset == "cnn") {
    add_cnn(layers);
  } else if (config.preset == "layers") {
    for (size_t i = 0; i < config.layers.size(); ++i) {
      const LayerSpec& spec = config.layers[i];
      const std::string name = spec.name.empty() ? spec.type + std::to_string(i) : spec.name;
      layers.push_back(make_layer(spec, name, i));
    }
  } else {
    throw UsageError("model.preset: unknown preset '" + config.preset + "'");
  }
  layers.push_back(std::make_unique<Dense>("classifier", num_classes, Dense::Init::kGlorot));
  return layers;
}

}  // namespace hpctrain
