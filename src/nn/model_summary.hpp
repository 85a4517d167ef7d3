// A printable summary of a model for `hpctrain inspect CONFIG`: one row per layer (and per
// sub-layer of composite layers) with output shape, parameters and forward FLOPs per
// sample, then the totals; with `times` (inspect --time), each layer's forward and
// backward time and forward GFLOP/s, and the whole step's.
#pragma once

#include <string>

#include "nn/layer_profile.hpp"
#include "nn/model.hpp"

namespace hpctrain {

std::string model_summary(const Model& model, const LayerTimes* times = nullptr);

}  // namespace hpctrain
