// The relu layer type's registration (the layer is header-only: relu.hpp).
#include "nn/relu.hpp"

#include "nn/layer_registry.hpp"

namespace hpctrain {

extern const LayerType kReluLayer = {
    {"relu", "max(x, 0), element by element", {}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> { return std::make_unique<Relu>(s.name); }};

}  // namespace hpctrain
