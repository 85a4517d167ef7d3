// A model's parameters and state as named tensors in their natural shapes (a convolution's
// weight [out, in, kh, kw], an LSTM's weight_ih_l0 [4 units, in], ...), named as PyTorch's
// state_dict names them in the module hpctrain_tools.torch_models builds (docs/export.md).
// `hpctrain export` writes them; the layers lay them out in the arenas already in PyTorch's
// order, so each tensor is one contiguous run of its arena.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nn/model.hpp"

namespace hpctrain {

struct LayerTensor {
  std::string name;    // the state_dict name: "layer1.0.conv1.weight", "dense0.bias"
  std::string layer;   // the hpctrain layer, or part of a composite one: "layer1.0.conv1"
  bool state = false;  // in the model's state arena (running statistics), else parameters
  size_t offset = 0;   // of its first value in that arena
  Dims shape;
};

// Every parameter and state tensor of `model`, in arena order (parameters and state
// interleaved as the layers come). For preset resnet18 and resnet34 the names are
// torchvision's (stem_conv is conv1, stem_bn bn1, classifier fc); for the other presets and
// layer lists they are the hpctrain layer's name, a dot and PyTorch's tensor name. A basic
// block's parts are conv1, bn1, conv2, bn2 and, for a projection shortcut, downsample.0
// (its convolution) and downsample.1 (its BatchNorm). Throws Error for a layer type with
// parameters or state that it does not know.
std::vector<LayerTensor> layer_tensors(const Model& model, const std::string& preset);

}  // namespace hpctrain
