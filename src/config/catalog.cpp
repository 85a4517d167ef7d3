// LayerSpec's typed access and the catalog's lookups.
#include "config/catalog.hpp"

#include "core/error.hpp"

namespace hpctrain {
namespace {

template <typename T>
T get(const LayerSpec& spec, std::string_view key, const char* kind) {
  const LayerValue* v = spec.find(key);
  if (v == nullptr || !std::holds_alternative<T>(*v)) {
    throw Error("layer " + spec.name + " (" + spec.type + "): no " + kind + " value for key '" +
                std::string(key) + "'");
  }
  return std::get<T>(*v);
}

}  // namespace

const LayerValue* LayerSpec::find(std::string_view key) const {
  for (const auto& [k, v] : values) {
    if (k == key) return &v;
  }
  return nullptr;
}

int64_t LayerSpec::integer(std::string_view key) const {
  return get<int64_t>(*this, key, "integer");
}

double LayerSpec::number(std::string_view key) const { return get<double>(*this, key, "number"); }

bool LayerSpec::flag(std::string_view key) const { return get<bool>(*this, key, "flag"); }

void LayerSpec::set(std::string_view key, LayerValue value) {
  for (auto& [k, v] : values) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  values.emplace_back(std::string(key), std::move(value));
}

const LayerKeyDecl* LayerTypeDecl::key(std::string_view key_name) const {
  for (const LayerKeyDecl& k : keys) {
    if (k.name == key_name) return &k;
  }
  return nullptr;
}

const LayerTypeDecl* Catalog::layer_type(std::string_view name) const {
  for (const LayerTypeDecl* t : layer_types) {
    if (t->name == name) return t;
  }
  return nullptr;
}

const StrategyDecl* Catalog::strategy(std::string_view name) const {
  for (const StrategyDecl* s : strategies) {
    if (s->name == name) return s;
  }
  return nullptr;
}

std::vector<std::string_view> Catalog::layer_type_names() const {
  std::vector<std::string_view> out;
  for (const LayerTypeDecl* t : layer_types) out.push_back(t->name);
  return out;
}

std::vector<std::string_view> Catalog::strategy_names() const {
  std::vector<std::string_view> out;
  for (const StrategyDecl* s : strategies) out.push_back(s->name);
  return out;
}

void complete_layer_spec(const LayerTypeDecl& decl, LayerSpec& spec) {
  for (const auto& [key, value] : spec.values) {
    if (decl.key(key) == nullptr) {
      throw UsageError("layer " + spec.name + ": a " + std::string(decl.name) +
                       " layer takes no key '" + key + "'");
    }
  }
  LayerSpec out{spec.type, spec.name, {}};
  for (const LayerKeyDecl& k : decl.keys) {
    if (const LayerValue* v = spec.find(k.name)) {
      out.values.emplace_back(std::string(k.name), *v);
    } else if (k.default_value) {
      out.values.emplace_back(std::string(k.name), *k.default_value);
    } else if (k.rule.default_from != nullptr) {
      out.values.emplace_back(std::string(k.name), k.rule.default_from(out));
    } else {
      throw UsageError("layer " + spec.name + ": required key '" + std::string(k.name) +
                       "' is missing for a " + std::string(decl.name) + " layer");
    }
  }
  spec = std::move(out);
}

}  // namespace hpctrain
