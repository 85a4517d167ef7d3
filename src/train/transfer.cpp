// Parameter transfer by layer name, and the frozen-layer mask as arena ranges.
#include "train/transfer.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "checkpoint/checkpoint_file.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

struct StoredLayer {
  std::string name, type;
  size_t params = 0, offset = 0;
  size_t state = 0, state_offset = 0;
};

// The count after `prefix` ("params=") in `word`; a damaged one is bad input naming `path`.
size_t count_after(const std::string& word, const std::string& prefix, const std::string& path) {
  size_t n = 0;
  const char* end = word.data() + word.size();
  const auto [stop, err] = std::from_chars(word.data() + prefix.size(), end, n);
  if (err != std::errc() || stop != end) {
    throw UsageError(path + ": architecture: '" + word + "' is not a count");
  }
  return n;
}

// Parses the "layer NAME TYPE params=N [state=S] out=..." lines of a checkpoint's
// architecture; offsets follow from the layer order.
std::vector<StoredLayer> stored_layers(const std::string& architecture, const std::string& path) {
  std::vector<StoredLayer> out;
  std::istringstream in(architecture);
  std::string line;
  size_t offset = 0, state_offset = 0;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, params, state;
    StoredLayer l;
    if (!(words >> kind >> l.name >> l.type >> params) || kind != "layer") continue;
    if (params.rfind("params=", 0) != 0) continue;
    l.params = count_after(params, "params=", path);
    if (words >> state && state.rfind("state=", 0) == 0)
      l.state = count_after(state, "state=", path);
    l.offset = offset;
    l.state_offset = state_offset;
    offset += l.params;
    state_offset += l.state;
    out.push_back(l);
  }
  return out;
}

}  // namespace

std::string load_initial_params(const std::string& path, Model& model) {
  const CheckpointState s = read_checkpoint_file(path);
  const std::vector<StoredLayer> stored = stored_layers(s.architecture, path);
  // The shared array, or the ranks' average when the run that wrote it averaged parameters
  // only every few steps.
  const std::vector<float> params = shared_array(s, kParamsArray, path);
  const auto stored_state = s.arrays.find(kStateArray);
  std::vector<float> host(model.param_count()), state(model.state_count());
  model.get_params(host.data());
  model.get_state(state.data());
  std::string loaded, kept;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    if (layer.param_count() == 0) continue;
    auto it = std::find_if(stored.begin(), stored.end(), [&](const StoredLayer& l) {
      return l.name == layer.name() && l.type == layer.type() && l.params == layer.param_count() &&
             l.state == layer.state_count();
    });
    std::string& list = it != stored.end() ? loaded : kept;
    list += (list.empty() ? "" : ", ") + layer.name();
    if (it == stored.end()) continue;
    if (it->offset + it->params > params.size()) {
      throw UsageError(path + ": the parameter array is shorter than its architecture says");
    }
    std::copy_n(params.begin() + static_cast<std::ptrdiff_t>(it->offset), it->params,
                host.begin() + static_cast<std::ptrdiff_t>(model.param_offset(i)));
    if (it->state > 0) {
      if (stored_state == s.arrays.end() ||
          it->state_offset + it->state > stored_state->second.size()) {
        throw UsageError(path +
                         ": the model state array is missing or shorter than its "
                         "architecture says");
      }
      std::copy_n(stored_state->second.begin() + static_cast<std::ptrdiff_t>(it->state_offset),
                  it->state, state.begin() + static_cast<std::ptrdiff_t>(model.state_offset(i)));
    }
  }
  if (loaded.empty()) {
    throw UsageError(path +
                     ": model.init_from: no layer of this model (name, type and size) "
                     "is in the checkpoint");
  }
  model.set_params(host.data());
  model.set_state(state.data());
  return "initialised from " + path + ": loaded " + loaded +
         (kept.empty() ? "" : "; newly initialised " + kept);
}

std::vector<ParamRange> trainable_ranges(const Model& model, const std::vector<std::string>& freeze,
                                         const std::string& config_file) {
  for (const std::string& name : freeze) {
    const auto& layers = model.layers();
    if (std::none_of(layers.begin(), layers.end(),
                     [&](const auto& l) { return l->name() == name; })) {
      std::string names;
      for (const auto& l : layers) names += (names.empty() ? "" : ", ") + l->name();
      throw UsageError(config_file + ": model.freeze: no layer named '" + name +
                       "' (layers: " + names + ")");
    }
  }
  std::vector<ParamRange> ranges;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    const size_t n = layer.param_count();
    if (n == 0 || std::count(freeze.begin(), freeze.end(), layer.name()) > 0) continue;
    const size_t off = model.param_offset(i);
    if (!ranges.empty() && ranges.back().offset + ranges.back().count == off) {
      ranges.back().count += n;
    } else {
      ranges.push_back({off, n});
    }
  }
  return ranges;
}

}  // namespace hpctrain
