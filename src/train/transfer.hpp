// Transfer learning: start from another run's parameters (model.init_from) and
// keep chosen layers fixed (model.freeze) while the rest fine-tune, the classic
// "freeze the base, train a new head".
#pragma once

#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.hpp"
#include "config/config.hpp"
#include "nn/model.hpp"
#include "optim/optimizer.hpp"

namespace hpctrain {

// Copies into `model` the parameters and state (BatchNorm statistics) of every layer of
// checkpoint `path` whose name, type, parameter and state counts and tensor shapes (read
// from the checkpoint's architecture: channels in and out, kernel) match; others keep their
// initial values. Returns a one-line report ("initialised from P: loaded a, b; newly
// initialised c (shape differs), d"; a layer of a name the checkpoint has says why it did
// not load). Throws UsageError (naming `path`) if nothing matches.
std::string load_initial_params(const std::string& path, Model& model);
// The same from checkpoint `stored`, already read from `path`.
std::string load_initial_params(const CheckpointState& stored, const std::string& path,
                                Model& model);

// The arena ranges to train: every layer except those named in `freeze`
// (adjacent ranges merged). Throws UsageError naming an unknown layer.
std::vector<ParamRange> trainable_ranges(const Model& model, const std::vector<std::string>& freeze,
                                         const std::string& config_file);

}  // namespace hpctrain
