// Named tensors of a model (layer_tensors.hpp): each layer type's tensors, shapes and
// PyTorch names, found from what every layer tells (type, parameter and state counts, input
// and output shapes, filters, parts), so no layer needs to know about the export.
#include "nn/layer_tensors.hpp"

#include <cmath>

#include "core/error.hpp"

namespace hpctrain {
namespace {

// Appends the tensors of one layer, walking its arenas' offsets.
class Collector {
 public:
  Collector(std::vector<LayerTensor>& out, size_t param_offset, size_t state_offset)
      : out_(out), params_(param_offset), state_(state_offset) {}

  void param(const std::string& prefix, const std::string& layer, const char* tensor,
             const Dims& shape) {
    out_.push_back({prefix + "." + tensor, layer, false, params_, shape});
    params_ += static_cast<size_t>(dims_elems(shape));
  }
  void state(const std::string& prefix, const std::string& layer, const char* tensor,
             const Dims& shape) {
    out_.push_back({prefix + "." + tensor, layer, true, state_, shape});
    state_ += static_cast<size_t>(dims_elems(shape));
  }
  size_t param_offset() const { return params_; }
  size_t state_offset() const { return state_; }

 private:
  std::vector<LayerTensor>& out_;
  size_t params_, state_;
};

// torchvision's name of a top-level layer of the ResNet presets.
std::string resnet_name(const std::string& layer) {
  if (layer == "stem_conv") return "conv1";
  if (layer == "stem_bn") return "bn1";
  if (layer == "classifier") return "fc";
  return layer;  // layerS.B: a stage's block, as torchvision's nn.Sequential numbers them
}

// torchvision's name of a basic block's part ("B.conv1", "B.shortcut_conv") inside the
// block.
std::string block_part_name(const std::string& block, const std::string& part) {
  const std::string suffix = part.substr(block.size() + 1);
  if (suffix == "shortcut_conv") return "downsample.0";
  if (suffix == "shortcut_bn") return "downsample.1";
  return suffix;
}

// The recurrent layer's stack: level l's weight_ih is [G units, in_l] (in_0 the input's
// features, else units), weight_hh [G units, units], both biases [G units].
void add_recurrent(const Layer& layer, const Dims& in, const Dims& out, const std::string& prefix,
                   Collector& c) {
  const int64_t g = std::string(layer.type()) == "lstm" ? 4 : 3;
  const int64_t units = out.back(), features = in.back();
  const auto level = [&](int64_t inputs) { return g * units * (inputs + units) + 2 * g * units; };
  const int64_t rest = static_cast<int64_t>(layer.param_count()) - level(features);
  HT_REQUIRE(rest >= 0 && rest % level(units) == 0,
             "layer_tensors: " + layer.name() + ": parameter count does not fit a stack");
  const int64_t levels = 1 + rest / level(units);
  for (int64_t l = 0; l < levels; ++l) {
    const std::string n = std::to_string(l);
    const int64_t inputs = l == 0 ? features : units;
    c.param(prefix, layer.name(), ("weight_ih_l" + n).c_str(), {g * units, inputs});
    c.param(prefix, layer.name(), ("weight_hh_l" + n).c_str(), {g * units, units});
    c.param(prefix, layer.name(), ("bias_ih_l" + n).c_str(), {g * units});
    c.param(prefix, layer.name(), ("bias_hh_l" + n).c_str(), {g * units});
  }
}

// Appends `layer`'s tensors under `prefix`; `in` and `out` are its per-sample shapes (only
// dense and recurrent layers read them: a composite's parts pass none).
void add_layer(const Layer& layer, const Dims& in, const Dims& out, const std::string& prefix,
               Collector& c) {
  const std::string type = layer.type();
  const size_t params_before = c.param_offset(), state_before = c.state_offset();
  const std::string& name = layer.name();
  if (type == "conv2d") {
    std::vector<FilterSpec> f;
    layer.filters(0, f);
    HT_REQUIRE(f.size() == 1, "layer_tensors: conv2d " + name + " has no single filter bank");
    const auto k = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(f[0].rs))));
    c.param(prefix, name, "weight", {f[0].k, f[0].c, k, k});
    if (layer.param_count() > static_cast<size_t>(f[0].k) * f[0].c * f[0].rs) {
      c.param(prefix, name, "bias", {f[0].k});
    }
  } else if (type == "dense") {
    const int64_t units = out.back();
    const int64_t inputs = static_cast<int64_t>(layer.param_count()) / units - 1;
    c.param(prefix, name, "weight", {units, inputs});
    c.param(prefix, name, "bias", {units});
  } else if (type == "batchnorm") {
    const auto channels = static_cast<int64_t>(layer.param_count() / 2);
    c.param(prefix, name, "weight", {channels});
    c.param(prefix, name, "bias", {channels});
    c.state(prefix, name, "running_mean", {channels});
    c.state(prefix, name, "running_var", {channels});
  } else if (type == "embedding") {
    const int64_t dim = out.back();
    c.param(prefix, name, "weight", {static_cast<int64_t>(layer.param_count()) / dim, dim});
  } else if (type == "lstm" || type == "gru") {
    add_recurrent(layer, in, out, prefix, c);
  } else if (type == "basic_block") {
    for (const Layer* part : layer.sublayers()) {
      add_layer(*part, {}, {}, prefix + "." + block_part_name(name, part->name()), c);
    }
  } else if (layer.param_count() > 0 || layer.state_count() > 0) {
    throw Error("export: layer " + name + " of type " + type +
                " has parameters that the export does not know how to name");
  }
  HT_REQUIRE(c.param_offset() - params_before == layer.param_count() &&
                 c.state_offset() - state_before == layer.state_count(),
             "layer_tensors: the tensors of " + name + " do not cover its parameters and state");
}

}  // namespace

std::vector<LayerTensor> layer_tensors(const Model& model, const std::string& preset) {
  const bool resnet = preset == "resnet18" || preset == "resnet34";
  std::vector<LayerTensor> out;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    Collector c(out, model.param_offset(i), model.state_offset(i));
    const Dims& in = i == 0 ? model.input_dims() : model.layer_output_dims(i - 1);
    add_layer(layer, in, model.layer_output_dims(i),
              resnet ? resnet_name(layer.name()) : layer.name(), c);
  }
  return out;
}

}  // namespace hpctrain
