// The Trainer runs one training job on one rank: set-up (files, model, optimizer,
// loaders; local work only, so failures can be agreed on), then the epoch loop
// with train / validation / test phases, metrics.csv and summary.json.
// Used from the main thread; owns everything it creates.
#pragma once

#include <memory>
#include <optional>

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "config/config.hpp"
#include "data/dataset_file.hpp"
#include "data/loader.hpp"
#include "nn/model.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/sgd.hpp"
#include "train/metrics.hpp"

namespace hpctrain {

class MpiEnv;

class Trainer {
 public:
  // Local set-up only (no collective calls): throws UsageError for bad input.
  Trainer(const Config& config, const MpiEnv& env);
  ~Trainer();

  // Collective: trains, evaluates, writes outputs (rank 0). Returns the exit code.
  int run();

 private:
  struct EvalResult {
    double loss = 0, accuracy = 0;
  };
  // One pass over each rank's shard of `loader`; identical result on every rank.
  EvalResult evaluate(Loader& loader);
  // One epoch of training; fills the train fields of `m`.
  void train_epoch(int epoch, EpochMetrics& m);
  void exchange_gradients();
  void write_outputs(const RunSummary& summary);

  Config config_;
  int rank_, world_size_, threads_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DatasetFile> train_file_, val_file_, test_file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Sgd> sgd_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Loader> train_loader_, val_loader_, test_loader_;
  DeviceArray<LossStats> stats_;
  int num_classes_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t global_step_ = 0;
  std::unique_ptr<MetricsCsv> metrics_csv_;
};

}  // namespace hpctrain
