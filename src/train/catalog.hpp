// hpctrain's catalog for the config loader: the layer types nn/ registers and the exchange
// strategies train/ registers (config/catalog.hpp). Every program that loads a config
// passes it to load_config.
#pragma once

#include "config/catalog.hpp"

namespace hpctrain {

const Catalog& catalog();

}  // namespace hpctrain
