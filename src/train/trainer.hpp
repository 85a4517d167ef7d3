// The Trainer runs one training job on one rank: set-up (files, model, optimizer;
// local work only, so failures can be agreed on), then resume, the epoch loop with
// train / validation / test phases, checkpoints, metrics.csv and summary.json.
// Used from the main thread; owns everything it creates.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "comm/model_collectives.hpp"
#include "config/config.hpp"
#include "data/batch_plan.hpp"
#include "data/dataset_file.hpp"
#include "data/loader.hpp"
#include "nn/model.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/optimizer.hpp"
#include "train/batch_stager.hpp"
#include "train/checkpointing.hpp"
#include "train/exchange.hpp"
#include "train/loss_scaler.hpp"
#include "train/metrics.hpp"
#include "train/watchdog.hpp"

namespace hpctrain {

class MpiEnv;

class Trainer {
 public:
  // Local set-up only (no collective calls): throws UsageError for bad input.
  // `resume` is "auto", "never" or a checkpoint path.
  Trainer(const Config& config, const MpiEnv& env, const std::string& resume);
  ~Trainer();

  // Collective: resumes, trains, evaluates, writes outputs (rank 0). Returns the
  // exit code: 0 done, 75 stopped by a signal after committing a checkpoint.
  int run();
  // Collective: evaluates the checkpoint given as `resume` on the validation and
  // test sets and writes <run.dir>/eval.json (rank 0).
  int evaluate_checkpoint();

 private:
  struct EvalResult {
    double loss = 0, accuracy = 0;
  };
  enum class EpochEnd { kCompleted, kStopped };

  // Training: the train loader from `start_step` and the validation passes still
  // to come; else (evaluation) one pass of validation and test.
  void create_loaders(int64_t start_step, bool training);
  // One pass over each rank's shard of `loader`; identical result on every rank (when the
  // ranks hold the same model: Exchange::sync_for_evaluation).
  EvalResult evaluate(Loader& loader);
  // The model made the same on every rank (Exchange::sync_for_evaluation), then a
  // checkpoint of the current step. Collective.
  void save_checkpoint(bool wait);
  // The step's gradients in the model's arena: plan_.accumulate micro-batches popped,
  // forwarded and backpropagated, all but the last summed in accumulated_ and added to the
  // last's. grad_scale: the loss gradient's factor (Exchange::gradient_scale).
  void compute_gradients(float grad_scale, bool timing);
  // Trains epoch `epoch` (1-based) from its step `first_step`; fills `m`.
  EpochEnd train_epoch(int epoch, int64_t first_step, EpochMetrics& m);
  // Collective: the communicator, the watchdog, the collectives over model memory and the
  // exchange strategy (training only).
  void connect();
  // Per-step agreement across ranks: stop on a signal, checkpoint by time.
  bool agree_on_control(bool& checkpoint_now);
  void write_summary(const RunSummary& summary);
  // <run.dir>/STOPPED: written when a signal stopped the run, removed on start.
  std::string stopped_marker() const;

  Config config_;
  int rank_, world_size_, threads_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DatasetFile> train_file_, val_file_, test_file_;
  std::unique_ptr<Model> model_;
  std::vector<ParamRange> trainable_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LossScaler> scaler_;  // precision fp16
  int64_t skipped_steps_ = 0;           // by scaler_, in this run
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<ModelCollectives> collectives_;
  std::unique_ptr<Exchange> exchange_;  // distributed.strategy
  std::unique_ptr<TrainingCheckpoints> checkpoints_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<BatchStager> stager_;  // before the loaders, whose buffers it pins
  std::unique_ptr<Loader> train_loader_, val_loader_, test_loader_;
  DeviceArray<LossStats> stats_;
  int num_classes_ = 0;
  BatchPlan plan_;                  // the ranks' batches and shards
  DeviceArray<float> accumulated_;  // train.accumulate_steps > 1: the summed micro-batches
  int64_t steps_per_epoch_ = 0;
  int64_t global_step_ = 0;
  PhaseSeconds phase_totals_{};  // train.step_timing: summed over epochs (slowest rank's)
  std::unique_ptr<MetricsCsv> metrics_csv_;
};

}  // namespace hpctrain
