// The Trainer runs one training job on one rank: set-up (files, model, optimizer;
// local work only, so failures can be agreed on), then resume, the epoch loop with
// train / validation / test phases, checkpoints, metrics.csv and summary.json.
// Used from the main thread; owns everything it creates.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "config/config.hpp"
#include "data/dataset_file.hpp"
#include "data/loader.hpp"
#include "nn/model.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/optimizer.hpp"
#include "train/batch_stager.hpp"
#include "train/checkpointing.hpp"
#include "train/gradient_buckets.hpp"
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
  // One pass over each rank's shard of `loader`; identical result on every rank.
  EvalResult evaluate(Loader& loader);
  // Averages the model state (BatchNorm statistics, which each rank moves with its own
  // batches) over the ranks if training changed it since the last time, so that every
  // rank evaluates and checkpoints the same model. Collective.
  void sync_model_state();
  // sync_model_state(), then a checkpoint of the current step. Collective.
  void save_checkpoint(bool wait);
  // Trains epoch `epoch` (1-based) from its step `first_step`; fills `m`.
  EpochEnd train_epoch(int epoch, int64_t first_step, EpochMetrics& m);
  // Picks how gradients are summed: NCCL (device_collectives_) for `auto` or `nccl` when
  // the backend has device collectives and no two ranks share a GPU, else the host
  // algorithm (ring unless `mpi`). Collective.
  void choose_allreduce();
  void exchange_gradients();
  // Model memory averaged over, or broadcast from rank 0 to, the ranks. Collective.
  void average_over_ranks(float* data, size_t n);
  void broadcast_from_rank0(float* data, size_t n);
  // Runs the collective f on n floats of model memory at `data` as host memory: in place
  // when the backend's memory is host memory, else on a copy in stage_ (copied back to
  // the device when write_back). Skipped on a single rank, where every collective is the
  // identity (and the copies would cost a device round trip per step).
  template <typename F>
  void collective_on_host(float* data, size_t n, bool write_back, F&& f);
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
  std::unique_ptr<TrainingCheckpoints> checkpoints_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<BatchStager> stager_;  // before the loaders, whose buffers it pins
  std::unique_ptr<Loader> train_loader_, val_loader_, test_loader_;
  DeviceArray<LossStats> stats_;
  int num_classes_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t global_step_ = 0;
  bool state_diverged_ = false;                                    // see sync_model_state()
  AllreduceAlgorithm host_algorithm_ = AllreduceAlgorithm::kRing;  // see choose_allreduce()
  bool device_collectives_ = false;
  std::unique_ptr<GradientBuckets> buckets_;  // with device collectives
  PhaseSeconds phase_totals_{};  // train.step_timing: summed over epochs (slowest rank's)
  // Host staging for a backend whose memory is not host memory (Backend::host_accessible).
  std::vector<float> stage_;
  std::unique_ptr<float, std::function<void(float*)>> stage_pin_;  // unpins stage_
  std::unique_ptr<MetricsCsv> metrics_csv_;
};

}  // namespace hpctrain
