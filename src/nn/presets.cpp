// Model presets. The classifier head is always a dense layer named "classifier"
// sized to the data set's class count.
#include "nn/presets.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "nn/basic_block.hpp"
#include "nn/batchnorm.hpp"
#include "nn/conv2d.hpp"
#include "nn/dense.hpp"
#include "nn/embedding.hpp"
#include "nn/flatten.hpp"
#include "nn/global_avgpool.hpp"
#include "nn/layer_registry.hpp"
#include "nn/pool2d.hpp"
#include "nn/relu.hpp"

namespace hpctrain {
namespace {

// "model.layers[3]", the config entry of a layer list's layer `i`.
std::string entry(size_t i) { return "model.layers[" + std::to_string(i) + "]"; }

// The cnn preset: two 3x3 "same" convolutions with ReLU and 2x2 max pooling, then a dense
// layer of 128 (28x28 inputs: 32x14x14 -> 64x7x7 -> 128 -> classes).
void add_cnn(std::vector<std::unique_ptr<Layer>>& layers) {
  const int filters[] = {32, 64};
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    layers.push_back(std::make_unique<Conv2d>("conv" + n, Conv2d::Options{filters[i], 3, 1, 1}));
    layers.push_back(std::make_unique<Relu>("relu" + n));
    layers.push_back(std::make_unique<Pool2d>("pool" + n, Pool2d::Kind::kMax, 2, 2));
  }
  layers.push_back(std::make_unique<Flatten>("flatten"));
  layers.push_back(std::make_unique<Dense>("dense0", 128));
  layers.push_back(std::make_unique<Relu>("relu2"));
}

// ResNet-18/34 (He et al. 2016, torchvision's layout): a stem, four stages of basic blocks
// with width, 2x, 4x and 8x channels (each stage after the first halves the resolution in
// its first block), global average pooling. The ImageNet stem is a 7x7 stride-2
// convolution, BatchNorm, ReLU and 3x3 stride-2 max pooling; the small-image stem a 3x3
// stride-1 convolution, BatchNorm and ReLU (as for CIFAR), which keeps 28x28 inputs from
// shrinking to 1x1 before the last stage.
void add_resnet(std::vector<std::unique_ptr<Layer>>& layers, const ModelConfig& config,
                const Dims& input_dims, const int (&blocks)[4]) {
  const int w = config.width;
  bool small = config.stem == "small";
  if (config.stem == "auto") {
    small = input_dims.size() == 3 && std::min(input_dims[1], input_dims[2]) < 64;
  }
  if (small) {
    layers.push_back(std::make_unique<Conv2d>("stem_conv", Conv2d::Options{w, 3, 1, 1, false}));
  } else {
    layers.push_back(std::make_unique<Conv2d>("stem_conv", Conv2d::Options{w, 7, 2, 3, false}));
  }
  layers.push_back(std::make_unique<BatchNorm>("stem_bn"));
  layers.push_back(std::make_unique<Relu>("stem_relu"));
  if (!small) layers.push_back(std::make_unique<Pool2d>("stem_pool", Pool2d::Kind::kMax, 3, 2, 1));
  for (int stage = 0; stage < 4; ++stage) {
    for (int b = 0; b < blocks[stage]; ++b) {
      const int stride = stage > 0 && b == 0 ? 2 : 1;
      layers.push_back(std::make_unique<BasicBlock>(
          "layer" + std::to_string(stage + 1) + "." + std::to_string(b), w << stage, stride));
    }
  }
  layers.push_back(std::make_unique<GlobalAvgPool>("avgpool"));
}

}  // namespace

std::vector<std::unique_ptr<Layer>> build_layers(const ModelConfig& config, int num_classes,
                                                 const Dims& input_dims) {
  return build_layers(config, ModelData{num_classes}, input_dims, "model");
}

std::vector<std::unique_ptr<Layer>> build_layers(const ModelConfig& config, const ModelData& data,
                                                 const Dims& input_dims,
                                                 const std::string& source) {
  const int num_classes = data.num_classes;
  std::vector<std::unique_ptr<Layer>> layers;
  if (config.preset == "mlp") {
    for (size_t i = 0; i < config.hidden.size(); ++i) {
      layers.push_back(std::make_unique<Dense>("dense" + std::to_string(i), config.hidden[i]));
      layers.push_back(std::make_unique<Relu>("relu" + std::to_string(i)));
    }
  } else if (config.preset == "cnn") {
    add_cnn(layers);
  } else if (config.preset == "resnet18") {
    add_resnet(layers, config, input_dims, {2, 2, 2, 2});
  } else if (config.preset == "resnet34") {
    add_resnet(layers, config, input_dims, {3, 4, 6, 3});
  } else if (config.preset == "layers") {
    for (size_t i = 0; i < config.layers.size(); ++i) {
      LayerSpec spec = config.layers[i];
      if (spec.name.empty()) spec.name = spec.type + std::to_string(i);
      try {
        layers.push_back(build_layer(spec, i));
      } catch (const UsageError& e) {
        const std::string what = e.what();
        throw UsageError(source + ": " +
                         (what.rfind("model.layers[", 0) == 0 ? what : entry(i) + ": " + what));
      }
    }
  } else {
    throw UsageError("model.preset: unknown preset '" + config.preset + "'");
  }
  // Only a layer list has embeddings (the config allows one, as model.layers[0]).
  for (size_t i = 0; i < layers.size(); ++i) {
    auto* embedding = dynamic_cast<Embedding*>(layers[i].get());
    if (embedding == nullptr) continue;
    if (data.vocab_size == 0) {
      throw UsageError(source + ": " + entry(i) + ": embedding '" + embedding->name() +
                       "' needs token data (docs/formats.md, \"Token files\"); data.train has "
                       "images");
    }
    try {
      embedding->fit_vocab(data.vocab_size, data.act_type);
    } catch (const UsageError& e) {
      throw UsageError(source + ": " + entry(i) + ".vocab: " + e.what());
    }
  }
  layers.push_back(std::make_unique<Dense>("classifier", num_classes, Dense::Init::kGlorot,
                                           /*per_step=*/data.per_step > 0));
  if (data.per_step > 0 && config.preset != "layers") {
    throw UsageError(source + ": model.preset: " + config.preset +
                     " cannot predict the next token at every step; use preset layers with "
                     "an lstm or gru that has return_sequences: true");
  }
  // Every layer's output shape now (pure functions of the input dims; the model computes
  // them again), so that a layer that does not fit its input names the config.
  auto shape_after = [&](Layer& layer, const Dims& in) {
    try {
      return layer.output_dims(in);
    } catch (const UsageError& e) {
      throw UsageError(source + ": model: " + e.what());
    }
  };
  Dims dims = input_dims;
  for (size_t i = 0; i + 1 < layers.size(); ++i) dims = shape_after(*layers[i], dims);
  // The classifier sees [steps, features] only if the last sequence layer returns them.
  if (data.per_step > 0 && (dims.size() != 2 || dims[0] != data.per_step)) {
    throw UsageError(source + ": model: data.train has " + std::to_string(data.per_step) +
                     " next tokens per sample, so the layers before the classifier must give " +
                     std::to_string(data.per_step) + " steps [" + std::to_string(data.per_step) +
                     ", features], but they give an output of " + dims_text(dims) +
                     (dims.size() == 2 && dims[0] == 1
                          ? " (token ids come as one step of " + std::to_string(data.per_step) +
                                " features without an embedding layer first)"
                          : " (the last lstm or gru needs return_sequences: true)"));
  }
  shape_after(*layers.back(), dims);
  return layers;
}

}  // namespace hpctrain
