// Builds the layer list a config describes: preset "mlp" (dense+relu per hidden
// width), "cnn" (a small fixed conv net for 28x28 images), "resnet18"/"resnet34" (He et
// al.'s basic-block ResNets) or "layers" (the user's list), then a dense classifier.
// `input_dims` is the per-sample input shape (the ResNet stem depends on it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/dtype.hpp"
#include "nn/layer.hpp"

namespace hpctrain {

std::vector<std::unique_ptr<Layer>> build_layers(const ModelConfig& config, int num_classes,
                                                 const Dims& input_dims);

// What the model's two ends take from a data set.
struct ModelData {
  int num_classes = 0;
  int64_t vocab_size = 0;  // token data: embedding layers without a vocab take it
  int64_t per_step = 0;    // language modelling: the T steps the classifier predicts
  // The activations' type (precision): embedding ids must be exact in it.
  DType act_type = DType::kF32;
};

// For a data set: embedding layers need token data and get its vocabulary, and with
// per_step the classifier is applied at every step, whose output must be T rows of
// num_classes (throws UsageError naming `source` and what to change otherwise).
std::vector<std::unique_ptr<Layer>> build_layers(const ModelConfig& config, const ModelData& data,
                                                 const Dims& input_dims, const std::string& source);

}  // namespace hpctrain
