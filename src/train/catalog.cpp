// The catalog, assembled once from the two registries.
#include "train/catalog.hpp"

#include "nn/layer_registry.hpp"
#include "train/exchange.hpp"

namespace hpctrain {

const Catalog& catalog() {
  static const Catalog c = [] {
    Catalog out;
    for (const LayerType* t : layer_types()) out.layer_types.push_back(&t->decl);
    for (const ExchangeStrategy* s : exchange_strategies()) out.strategies.push_back(&s->decl);
    return out;
  }();
  return c;
}

}  // namespace hpctrain
