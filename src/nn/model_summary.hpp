// A printable summary of a model for `hpctrain inspect CONFIG`: one row per layer (and per
// sub-layer of composite layers) with output shape, parameters and forward FLOPs per
// sample, then the totals.
#pragma once

#include <string>

#include "nn/model.hpp"

namespace hpctrain {

std::string model_summary(const Model& model);

}  // namespace hpctrain
