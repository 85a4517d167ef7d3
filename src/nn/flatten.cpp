// The flatten layer type's registration (the layer is header-only: flatten.hpp).
#include "nn/flatten.hpp"

#include "nn/layer_registry.hpp"

namespace hpctrain {

extern const LayerType kFlattenLayer = {
    {"flatten", "[C, H, W] to [C x H x W], a view (no copy)", {}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> { return std::make_unique<Flatten>(s.name); }};

}  // namespace hpctrain
