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
  // What fixes the shapes of its tensors beyond type and counts (shape_key).
  std::string shape;
};

// The channels (of [C, H, W]) or features (the last extent) of a shape "32x8x8", "16x128".
std::string features(const std::string& dims) {
  const size_t x = dims.find('x');
  if (std::count(dims.begin(), dims.end(), 'x') == 2) return dims.substr(0, x);
  const size_t last = dims.rfind('x');
  return last == std::string::npos ? dims : dims.substr(last + 1);
}

// What, beside the type and the parameter and state counts, fixes the shapes of a layer's
// tensors (layer_tensors.hpp), from its architecture line: the channels or features it
// reads (`in`, the previous layer's output) and writes, and its kernel ("k=3x3"). A dense
// layer's inputs, an embedding's vocab and a batchnorm's channels follow from the counts;
// stride, padding and the image size change no tensor. 80 parameters are a conv2d of 8
// 3x3 filters on 1 channel or of 8 1x1 filters on 9 channels: not the same tensors.
std::string shape_key(const std::string& type, const std::string& in, const std::string& out,
                      const std::string& attributes) {
  std::string key = "out=" + features(out);
  if (type != "dense" && type != "embedding" && type != "batchnorm") {
    key += " in=" + features(in);
  }
  std::istringstream words(attributes);
  for (std::string w; words >> w;) {
    if (w.rfind("k=", 0) == 0) key += " " + w;
  }
  return key;
}

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

// Parses the "input SHAPE" and "layer NAME TYPE params=N [state=S] out=SHAPE [ATTRIBUTES]"
// lines of a checkpoint's (or a model's) architecture; offsets follow from the layer order.
std::vector<StoredLayer> stored_layers(const std::string& architecture, const std::string& path) {
  std::vector<StoredLayer> out;
  std::istringstream in(architecture);
  std::string line, previous;  // the input's or the last layer's output shape
  size_t offset = 0, state_offset = 0;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, params, word;
    StoredLayer l;
    if (!(words >> kind)) continue;
    if (kind == "input") words >> previous;
    if (!(words >> l.name >> l.type >> params) || kind != "layer") continue;
    if (params.rfind("params=", 0) != 0) continue;
    l.params = count_after(params, "params=", path);
    std::string shape, attributes;
    while (words >> word) {
      if (word.rfind("state=", 0) == 0) {
        l.state = count_after(word, "state=", path);
      } else if (word.rfind("out=", 0) == 0) {
        shape = word.substr(4);
      } else {
        attributes += " " + word;
      }
    }
    l.shape = shape_key(l.type, previous, shape, attributes);
    previous = shape;
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
  return load_initial_params(read_checkpoint_file(path), path, model);
}

std::string load_initial_params(const CheckpointState& s, const std::string& path, Model& model) {
  const std::vector<StoredLayer> stored = stored_layers(s.architecture, path);
  // The shared array, or the ranks' average when the run that wrote it averaged parameters
  // only every few steps.
  const std::vector<float> params = shared_array(s, kParamsArray, path);
  const auto stored_state = s.arrays.find(kStateArray);
  std::vector<float> host(model.param_count()), state(model.state_count());
  model.get_params(host.data());
  model.get_state(state.data());
  // This model's layers as the same parser reads them, so both sides compare alike.
  const std::vector<StoredLayer> own = stored_layers(model.architecture(), path);
  HT_REQUIRE(own.size() == model.layers().size(), "transfer: the model's architecture lines");
  std::string loaded, kept;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    if (layer.param_count() == 0) continue;
    const auto it = std::find_if(stored.begin(), stored.end(),
                                 [&](const StoredLayer& l) { return l.name == layer.name(); });
    // Why a layer of the same name does not load (a fresh layer needs no reason).
    std::string differs;
    if (it != stored.end()) {
      if (it->type != own[i].type) {
        differs = " (type differs)";
      } else if (it->params != own[i].params || it->state != own[i].state) {
        differs = " (size differs)";
      } else if (it->shape != own[i].shape) {
        differs = " (shape differs)";
      }
    }
    const bool match = it != stored.end() && differs.empty();
    std::string& list = match ? loaded : kept;
    list += (list.empty() ? "" : ", ") + layer.name() + differs;
    if (!match) continue;
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
                     ": no layer of this model (name, type, size and shape) is in the "
                     "checkpoint" +
                     (kept.empty() ? std::string() : ": " + kept));
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
    const bool frozen = std::count(freeze.begin(), freeze.end(), layer.name()) > 0;
    if (frozen && n == 0) {  // a slip for another layer: nothing of it would change anyway
      throw UsageError(config_file + ": model.freeze: layer '" + layer.name() +
                       "' has no parameters to freeze");
    }
    if (n == 0 || frozen) continue;
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
