// Shape checks shared by the pooling layers: a per-sample input [c, h, w] and the window
// (kernel, stride, padding) become a Pool2dShape, or a UsageError naming the layer.
#pragma once

#include <string>

#include "core/conv_shape.hpp"
#include "nn/tensor.hpp"

namespace hpctrain {

// Square window; requires kernel >= 1, stride >= 1, 0 <= 2 * padding <= kernel (so every
// window holds input cells, PyTorch's rule) and an input at least the kernel's size once
// padded. The returned shape has n = 0; the caller sets it per batch.
Pool2dShape pool_shape(const std::string& layer, const char* type, const Dims& input, int kernel,
                       int stride, int padding);

// "k=2x2 s=2x2 p=0x0" for Layer::attributes().
std::string pool_attributes(const Pool2dShape& s);

}  // namespace hpctrain
