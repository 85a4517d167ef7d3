// What `hpctrain eval`, `generate` and `export` take as the model: a run directory, a
// config file or a checkpoint file, resolved to a config and a checkpoint; and the model
// built from them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint_store.hpp"
#include "config/config.hpp"
#include "data/dataset_file.hpp"
#include "nn/model.hpp"

namespace hpctrain {

// The arguments every model command takes: TARGET, --checkpoint PATH, --set key.path=value.
struct TargetArgs {
  std::string target, checkpoint;
  std::vector<std::string> overrides;
};

// Takes args[i] into `out` when it is TARGET, --checkpoint PATH or --set key.path=value
// (advancing i past the value) and returns true; returns false for any other option, which
// the command reads itself. Throws UsageError "`command`: ..." for a second TARGET.
bool take_target_arg(const std::vector<std::string>& args, size_t& i, TargetArgs& out,
                     const std::string& command);

struct ModelTarget {
  Config config;
  // The checkpoint file given, or "auto": the newest valid one in config.checkpoint.dir.
  std::string checkpoint;
};

// `args.target`:
//   a directory   a run directory: its config.yaml, with run.dir (and a checkpoint.dir
//                 inside the old run.dir) moved to `target`, so a run directory that was
//                 moved or is named from elsewhere still finds its checkpoints;
//   an HDF5 file  a checkpoint: the config stored in it, and that checkpoint;
//   else          a config file.
// `args.checkpoint` (may be empty) overrides the checkpoint chosen; `args.overrides` apply
// to the config. Throws UsageError naming the file.
ModelTarget resolve_model_target(const TargetArgs& args);

// The checkpoint of `t`, read (once: a run still training there may prune the file after
// it): "auto" is the newest valid one in checkpoint.dir. Throws UsageError "`command`: no
// valid checkpoint in DIR ..." when there is none.
LoadedCheckpoint read_target_checkpoint(const ModelTarget& t, const std::string& command);

// `config`'s data.train, opened (a file, a glob's or a list's files).
std::unique_ptr<DataSource> open_training_data(const Config& config);

// The model `config` builds for samples of `shape`, in batches of up to `max_batch`, on
// `backend`, holding the parameters of `checkpoint`. Throws UsageError naming the checkpoint
// when it holds another model.
std::unique_ptr<Model> load_checkpoint_model(Backend& backend, const Config& config,
                                             const DatasetShape& shape, int64_t max_batch,
                                             const LoadedCheckpoint& checkpoint);

}  // namespace hpctrain
