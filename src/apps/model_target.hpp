// What `hpctrain eval` and `hpctrain generate` take as the model: a run directory, a
// config file or a checkpoint file, resolved to a config and a checkpoint.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace hpctrain {

struct ModelTarget {
  Config config;
  // The checkpoint file given, or "auto": the newest valid one in config.checkpoint.dir.
  std::string checkpoint;
};

// `target`:
//   a directory   a run directory: its config.yaml, with run.dir (and a checkpoint.dir
//                 inside the old run.dir) moved to `target`, so a run directory that was
//                 moved or is named from elsewhere still finds its checkpoints;
//   an HDF5 file  a checkpoint: the config stored in it, and that checkpoint;
//   else          a config file.
// `checkpoint` (may be empty) overrides the checkpoint chosen. `overrides` apply to the
// config. Throws UsageError naming the file.
ModelTarget resolve_model_target(const std::string& target, const std::string& checkpoint,
                                 const std::vector<std::string>& overrides);

// The checkpoint file of `t`: "auto" becomes the newest valid one in checkpoint.dir.
// Throws UsageError "`command`: no valid checkpoint in DIR ..." when there is none.
std::string checkpoint_path(const ModelTarget& t, const std::string& command);

}  // namespace hpctrain
