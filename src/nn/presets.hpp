// Builds the layer list a config describes: preset "mlp" (dense+relu per hidden
// width), "cnn" (a small fixed conv net for 28x28 images), "resnet18"/"resnet34" (He et
// al.'s basic-block ResNets) or "layers" (the user's list), then a dense classifier.
// `input_dims` is the per-sample input shape (the ResNet stem depends on it).
#pragma once

#include <memory>
#include <vector>

#include "config/config.hpp"
#include "nn/layer.hpp"

namespace hpctrain {

std::vector<std::unique_ptr<Layer>> build_layers(const ModelConfig& config, int num_classes,
                                                 const Dims& input_dims);

}  // namespace hpctrain
