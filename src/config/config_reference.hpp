// The config reference, made from the schema (config/keys.def) and the catalog (layer types
// and exchange strategies): `hpctrain config --list` prints it as text, one line per key,
// and `hpctrain config --markdown` as docs/config.md. Both come from the tables the loader
// checks against, so they cannot disagree with it (a test keeps docs/config.md in sync).
#pragma once

#include <string>

#include "config/catalog.hpp"

namespace hpctrain {

std::string config_reference_text(const Catalog& catalog);
std::string config_reference_markdown(const Catalog& catalog);

}  // namespace hpctrain
