#include "apps/model_target.hpp"

#include <filesystem>
#include <optional>
#include <system_error>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/checkpoint_store.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "data/dataset_files.hpp"
#include "nn/presets.hpp"
#include "train/catalog.hpp"
#include "train/model_data.hpp"
#include "train/transfer.hpp"

namespace hpctrain {

bool take_target_arg(const std::vector<std::string>& args, size_t& i, TargetArgs& out,
                     const std::string& command) {
  const std::string& a = args[i];
  const bool has_value = i + 1 < args.size();
  if (a == "--set" && has_value) {
    out.overrides.push_back(args[++i]);
  } else if (a == "--checkpoint" && has_value) {
    out.checkpoint = args[++i];
    // An empty value (an unset shell variable) would mean the newest checkpoint, unsaid.
    if (out.checkpoint.empty()) {
      throw UsageError(command + ": --checkpoint: expected a checkpoint path");
    }
  } else if (a.rfind("--", 0) == 0) {
    return false;
  } else if (out.target.empty()) {
    out.target = a;
  } else {
    throw UsageError(command + ": more than one run directory, checkpoint or config given");
  }
  return true;
}

ModelTarget resolve_model_target(const TargetArgs& args) {
  namespace fs = std::filesystem;
  const std::string& target = args.target;
  const std::string& checkpoint = args.checkpoint;
  const std::vector<std::string>& overrides = args.overrides;
  std::error_code ec;
  ModelTarget t;
  t.checkpoint = checkpoint.empty() ? "auto" : checkpoint;
  if (fs::is_directory(target, ec)) {
    const std::string config_path = target + "/config.yaml";
    if (!fs::exists(config_path, ec)) {
      throw UsageError(target + ": not a run directory (it has no config.yaml)");
    }
    t.config = load_config(config_path, overrides, catalog());
    // A run.dir of --set (run.dir=X, or run={dir: X}) would be set aside for target, unsaid.
    if (!overrides.empty() && t.config.run.dir != load_config(config_path, {}, catalog()).run.dir) {
      throw UsageError("--set run.dir: not with a run directory: " + target +
                       " is the run's directory");
    }
    const std::string old_dir = t.config.run.dir;
    if (!fs::equivalent(old_dir, target, ec)) {
      t.config.run.dir = target;
      // The checkpoints moved with it: those in the run directory or below it.
      const std::string inside = old_dir + "/";
      std::string& ckdir = t.config.checkpoint.dir;
      if (ckdir == old_dir || ckdir == inside) {
        ckdir = target;
      } else if (ckdir.rfind(inside, 0) == 0) {
        ckdir = target + "/" + ckdir.substr(inside.size());
      }
    }
  } else if (is_hdf5_file(target) || target.ends_with(".h5")) {
    // Any HDF5 file, and any .h5 file (one whose first bytes are damaged too), is taken for
    // a checkpoint, so that a damaged one is reported as such (read_checkpoint_file names
    // what is wrong), not as a config that is not YAML.
    const CheckpointState stored = read_checkpoint_file(target);
    t.config =
        load_config_text(stored.config_yaml, target + " (its stored config)", overrides, catalog());
    if (checkpoint.empty()) t.checkpoint = target;
  } else {
    t.config = load_config(target, overrides, catalog());
  }
  return t;
}

LoadedCheckpoint read_target_checkpoint(const ModelTarget& t, const std::string& command) {
  if (t.checkpoint != "auto") return {t.checkpoint, read_checkpoint_file(t.checkpoint)};
  std::optional<LoadedCheckpoint> newest = load_newest_valid(t.config.checkpoint.dir);
  if (!newest) {
    throw UsageError(command + ": no valid checkpoint in " + t.config.checkpoint.dir +
                     " (checkpoint.dir of " + t.config.source_file + ")");
  }
  return std::move(*newest);
}

std::unique_ptr<DataSource> open_training_data(const Config& config) {
  return open_data(expand_data_paths(config.data.train, config.source_file + ": data.train"));
}

std::unique_ptr<Model> load_checkpoint_model(Backend& backend, const Config& config,
                                             const DatasetShape& shape, int64_t max_batch,
                                             const LoadedCheckpoint& checkpoint) {
  const Dims dims = {shape.c, shape.h, shape.w};
  auto model = std::make_unique<Model>(
      backend, build_layers(config.model, model_data(shape), dims, config.source_file), dims,
      max_batch);
  if (checkpoint.state.architecture != model->architecture()) {
    throw UsageError(checkpoint.path + ": its model is not the one " + config.source_file +
                     " builds (compare hpctrain inspect of both)");
  }
  load_initial_params(checkpoint.state, checkpoint.path, *model);
  return model;
}

}  // namespace hpctrain
