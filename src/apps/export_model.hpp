// hpctrain export: a trained model's parameters and state as tensors in their natural
// shapes under PyTorch's names, with reference inputs and hpctrain's logits for them
// (docs/export.md): an HDF5 file (hdf5-layers, written here), or through the Python tools
// (hpctrain_tools export) a PyTorch state_dict or an ONNX model.
#pragma once

#include <string>
#include <vector>

namespace hpctrain {

// Runs `hpctrain export` with the arguments after the command name. Returns the exit code
// (for pytorch and onnx: the Python tool's). Throws UsageError for bad arguments, a
// checkpoint that does not load into the config's model, or an --out that exists without
// --force.
int cmd_export(const std::vector<std::string>& args);

}  // namespace hpctrain
