// The Trainer runs one training job on one rank: set-up in three stages
// (set_up_trainer), then resume, the epoch loop with train / validation / test phases,
// checkpoints, metrics.csv and summary.json. Used from the main thread; owns everything
// it creates.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "comm/model_collectives.hpp"
#include "config/config.hpp"
#include "data/batch_plan.hpp"
#include "data/dataset_files.hpp"
#include "data/loader.hpp"
#include "nn/model.hpp"
#include "optim/grad_clip.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/optimizer.hpp"
#include "train/async_sgd.hpp"
#include "train/balance.hpp"
#include "train/batch_stager.hpp"
#include "train/checkpointing.hpp"
#include "train/energy.hpp"
#include "train/energy_carry.hpp"
#include "train/epoch_tally.hpp"
#include "train/exchange.hpp"
#include "train/loss_scaler.hpp"
#include "train/metrics.hpp"
#include "train/run_lock.hpp"
#include "train/watchdog.hpp"

namespace hpctrain {

class MpiEnv;
class Progress;

class Trainer {
 public:
  // What the trainer is set up for: `train` (run()) or `eval` (evaluate_checkpoint()),
  // which may read a run directory that a training run is using.
  enum class Purpose { kTrain, kEval };

  // Set-up stage 1, local: the data files and the backend. Throws UsageError for bad input.
  // `resume` is "auto", "never" or a checkpoint path.
  Trainer(const Config& config, const MpiEnv& env, const std::string& resume);
  ~Trainer();
  // Set-up stage 2, collective: the communicator, and every rank's device. Nothing in it
  // fails on some ranks only.
  void meet();
  // Set-up stage 3, local: the batch plan, the model, the optimizer, the run directory (for
  // training, its lock, RunLock, held by rank 0 until the end), the checkpoint to resume
  // from. Throws UsageError for bad input.
  void prepare(Purpose purpose);

  const Config& config() const { return config_; }

  // Collective: resumes, trains, evaluates, writes outputs (rank 0). Returns the
  // exit code: 0 done, 75 stopped by a signal after committing a checkpoint.
  int run();
  // Collective: evaluates the checkpoint given as `resume` on the validation and
  // test sets and writes <run.dir>/eval.json (rank 0).
  int evaluate_checkpoint();

 private:
  struct EvalResult {
    double loss = 0, accuracy = 0;
    bool cut_short = false;  // a stop signal ended some rank's pass: no figures
    bool stop = false;       // some rank got a stop signal (a stoppable pass)
  };
  // kDiverged: a step's loss was not finite; the epoch ends before that step's checkpoint.
  // kStopAfter: a stop signal was agreed on at the epoch's last step; the epoch is complete
  // and stops after its validation and metrics row, so that its checkpoint has its row.
  enum class EpochEnd { kCompleted, kStopped, kDiverged, kStopAfter };

  // Training: the train loader from `start_step` and the validation passes still
  // to come; else (evaluation) one pass of validation and test.
  void create_loaders(int64_t start_step, bool training);
  LoaderOptions loader_options() const;  // of the train loader under plan_
  // The train loader under plan_, from step `start_step` (replacing the current one).
  void make_train_loader(int64_t start_step);
  // Balance auto, collective: the next epoch's plan from the ranks' measured speed, and a
  // train loader for it from step `start_step` (the next epoch's first).
  void rebalance(int64_t start_step);
  // The plan of restored per-rank batches (balance auto), when they fit this job.
  void plan_restored_batches();
  // One pass over each rank's shard of `loader`; identical result on every rank (when the
  // ranks hold the same model: Exchange::sync_for_evaluation).
  // `phase` ("validation", "test") names the pass in progress lines. A `stoppable` pass
  // (validation between epochs) ends on a rank at the first batch after a stop signal
  // unless the rest would take at most train.stop_validation_seconds at its rate so far,
  // and says whether any rank ended so or got one (trainer_eval.cpp).
  EvalResult evaluate(Loader& loader, const char* phase, bool stoppable = false);
  // The model made the same on every rank (Exchange::sync_for_evaluation), then a
  // checkpoint of the current step. Collective.
  void save_checkpoint(bool wait);
  // The step's gradients in the model's arena: plan_.accumulate micro-batches popped,
  // forwarded and backpropagated, all but the last summed in accumulated_ and added to the
  // last's. grad_scale: the loss gradient's factor (Exchange::gradient_scale). With
  // `measure`, returns the seconds of forward and backward (the device synchronised around
  // them; waits for input excluded), else 0.
  double compute_gradients(float grad_scale, bool timing, bool measure);
  // The device work of micro-batch `micro` of `k`: forward, loss, backward (the exchange
  // listening to backward when k is 1).
  void forward_backward(const BatchStager::Input& in, int64_t batch, float grad_scale, bool timing,
                        int micro, int k);
  // train.cuda_graph: runs a whole-batch step from its graph, recorded on the third step
  // that needs it (two eager steps first, so that operations have set themselves up);
  // false where the step is to run eagerly.
  bool replay_step(const BatchStager::Input& in, int64_t batch, float grad_scale, bool timing);
  // End of prepare(): whether steps may be graphs (train.cuda_graph), or why not (on:
  // UsageError); run() checks the exchange after connect().
  void choose_step_graphs();
  // Trains epoch `epoch` (1-based) from its step `first_step`; sets `m`'s epoch and lr, and
  // `own` to this run's figures of the epoch, over all ranks.
  EpochEnd train_epoch(int epoch, int64_t first_step, EpochMetrics& m, EpochTally& own);
  // The same under strategy async (trainer_async.cpp): segments of the epoch, each ended by
  // AsyncSgd::finish_segment, with checkpoints between them.
  EpochEnd train_epoch_async(int epoch, int64_t first_step, EpochMetrics& m, EpochTally& own);
  // This rank's figures of the epoch since t0 (trainer_tally.cpp): its loss statistics, the
  // loader's wait since wait0, comm_s, and its CPU seconds since cpu0. The caller has waited
  // for the device work.
  EpochTally own_tally(double t0, double wait0, double comm_s, double cpu0);
  // Collective, before a checkpoint in the middle of epoch `epoch`: once the device work is
  // done, the figures it carries (kEpochSoFarArray) become this run's (own_tally's, over all
  // ranks) with those of the runs before it.
  void keep_epoch_so_far(int epoch, double t0, double wait0, double comm_s, double cpu0);
  // The figures of `epoch` that the checkpoint resumed from carried (zeros for another).
  EpochTally carried(int epoch) const;
  // After the restore (resumed: from a checkpoint): what its arrays carry, and those arrays
  // at their lengths for the checkpoints of this run.
  void take_carried(bool resumed);
  // A worker's part of the segment [begin, end); returns the seconds spent pushing and
  // pulling. The progress line counts from batch `first`, trained from time t0.
  double work_async_segment(int64_t begin, int64_t end, int epoch, int64_t first, double t0,
                            Progress& progress);
  // Collective, after the last epoch: summary.json's "async".
  AsyncReport async_report(double samples) const;
  // Node-local rank 0 starts sampling energy (energy.interval_ms > 0).
  void start_energy();
  // Collective, before a checkpoint while the samplers run: a sample now on every node,
  // and the energy it carries (kEnergySoFarArray) becomes this run's so far over the nodes
  // with what the checkpoint resumed from carried.
  void keep_energy_so_far();
  // Collective: stops the samplers and sums the nodes' energy; `samples` trained meanwhile.
  std::optional<EnergySummary> finish_energy(double samples);
  // The energy of the run's epochs across its resumes (summary.json "energy_whole_run"):
  // what the checkpoint resumed from carried and `part`, this run's; none where this run
  // trained (`trained`) without sampling.
  std::optional<EnergySummary> whole_run_energy(const std::optional<EnergySummary>& part,
                                                bool trained) const;
  // Samples of one optimizer update: the global batch, or under async one worker's batch.
  int64_t update_batch() const;
  // Arrays of the parameters' size besides parameters and gradients (memory_check.hpp).
  int optimizer_slots() const;
  // Those of them that checkpoints store (momentum, Adam's moments).
  int saved_optimizer_slots() const;
  // Host memory of the prefetch buffers and the shards kept in memory (data.cache_mb).
  double data_bytes(int64_t max_batch, bool async) const;
  // The batch of the validation or test loader of `file`: `batch`, at most this rank's shard
  // of it (at least 1), so that its prefetch buffers are no larger than what they hold.
  int64_t eval_batch(int64_t batch, const DataSource& file) const;
  // Collective: the collectives over model memory and the exchange strategy (training
  // only). The watchdog is the constructor's, which watches opening the data files.
  void connect();
  // Collective, after restore: whether the checkpoint resumed from is the end of training
  // and the run wrote its summary, so there is nothing to do (says so on rank 0).
  bool already_complete();
  // 3. Stop on a signal: commits a checkpoint of this step, then the STOPPED marker;
  // returns the exit code 75.
  int stop_run();
  // Whether every rank's parameters are finite (ReLU passes NaN weights' activations on as
  // zeros, so the loss may stay finite); collective.
  bool params_finite();
  // Per-step agreement across ranks: stop on a signal, checkpoint by time.
  bool agree_on_control(bool& checkpoint_now, bool& diverged);
  void write_summary(const RunSummary& summary);
  // <run.dir>/STOPPED: written when a signal stopped the run, removed on start.
  std::string stopped_marker() const;

  Config config_;
  std::string resume_;
  int rank_, world_size_, threads_;
  std::vector<std::string> devices_;  // every rank's backend name (meet())
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DataSource> train_file_, val_file_, test_file_;
  Preprocess preprocess_;  // of the training images (evaluation: the normalisation only)
  std::unique_ptr<Model> model_;
  std::vector<ParamRange> trainable_;
  std::unique_ptr<Optimizer> optimizer_;
  // precision fp16, or fixed at 1 for train.on_nonfinite: skip_step
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<GradClipper> clipper_;  // optimizer.clip_grad_norm
  int64_t skipped_steps_ = 0;             // by scaler_, in this run
  // train.cuda_graph: the recorded steps by what they bake in (input slot, batch, loss
  // gradient factor, phase marks), the backend's graph id last.
  struct StepGraph {
    const void* images;
    const int32_t* labels;
    int64_t batch;
    float grad_scale;
    bool timing;
    int id;
  };
  std::vector<StepGraph> step_graphs_;
  bool graphs_allowed_ = false;
  // Whole-batch steps seen with graphs allowed, at the batch size of the latest.
  int64_t graph_candidates_ = 0;
  int64_t graph_candidate_batch_ = -1;
  int64_t graph_steps_ = 0;  // steps replayed from a graph in this run
  // train.on_nonfinite: skip_step: a step's loss statistics go to step_stats_ and join
  // stats_ after the optimizer step unless it was skipped. So do a deterministic async
  // worker's, unless the servers did not take the batch (trained again in the next
  // segment); taken_flags_ holds the device flags {0, 1} that merge_loss_stats reads there.
  bool skip_nonfinite_ = false;
  DeviceArray<LossStats> step_stats_;  // empty unless staged
  DeviceArray<float> taken_flags_;
  std::vector<int64_t> nonfinite_steps_;  // debug.nonfinite_steps, sorted
  std::string divergence_;                // why the run diverged, for the last line
  // A checkpoint fell due at an epoch's last step: it is saved after the epoch's row.
  bool save_after_row_ = false;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<ModelCollectives> collectives_;
  std::unique_ptr<Exchange> exchange_;  // distributed.strategy
  // rank 0 of train: run.dir and checkpoint.dir (where that is another directory) are this
  // job's; released after checkpoints_'s writer has ended
  std::unique_ptr<RunLock> run_lock_, checkpoint_lock_;
  std::unique_ptr<TrainingCheckpoints> checkpoints_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<BatchStager> stager_;  // before the loaders, whose buffers it pins
  std::unique_ptr<Loader> train_loader_, val_loader_, test_loader_;
  DeviceArray<LossStats> stats_;
  int num_classes_ = 0;
  // Labels per sample: 1, or T for language modelling (one prediction per step, each a
  // softmax row; the loss is the mean over every step of every sample).
  int64_t labels_per_sample_ = 1;
  BatchPlan plan_;                       // the ranks' batches and shards
  std::vector<float> batches_;           // balance auto: plan_.batch, kept in checkpoints
  std::unique_ptr<BalanceMeter> meter_;  // balance auto: this rank's speed
  // The figures of the epoch a checkpoint's step is in, up to that step (kEpochSoFarArray),
  // kept in checkpoints; carried_ those of the checkpoint resumed from, of carried_epoch_.
  std::vector<float> epoch_so_far_;
  EpochTally carried_;
  int carried_epoch_ = 0;
  std::vector<double> tally_scratch_;  // reduce_tally's and reduce_energy's
  // The energy of the run's epochs up to a checkpoint's step (kEnergySoFarArray), kept in
  // checkpoints; energy_carried_ that of the checkpoint resumed from. sampling_: on every
  // rank, the samplers run (from start_energy to finish_energy, energy.interval_ms > 0).
  std::vector<float> energy_so_far_;
  EnergySoFar energy_carried_;
  bool sampling_ = false;
  DeviceArray<float> accumulated_;  // train.accumulate_steps > 1: the summed micro-batches
  int64_t steps_per_epoch_ = 0;
  int64_t global_step_ = 0;
  PhaseSeconds phase_totals_{};  // train.step_timing: summed over epochs (slowest rank's)
  std::unique_ptr<MetricsCsv> metrics_csv_;
  std::unique_ptr<EnergySampler> energy_;  // node-local rank 0, energy.interval_ms > 0
  int local_rank_ = 0;
  int local_ranks_ = 1;   // the ranks on this node, who share its memory
  int device_ranks_ = 1;  // the ranks on this rank's GPU (host and bus id), this one included
  std::unique_ptr<AsyncLayout> async_layout_;  // strategy async
  std::unique_ptr<AsyncSgd> async_;
  std::vector<std::vector<int64_t>> staleness_;  // async: per epoch of this run
  std::vector<ServerStats> server_totals_;       // async: per server, this run
};

// The checkpoint array of the per-rank batches under balance auto.
inline constexpr const char* kBatchesArray = "train/batches";

// Loads the config (`load`) and sets a Trainer up on every rank of MPI_COMM_WORLD: stage 1
// and stage 3 with their failures agreed on by all ranks (the lowest failing rank prints
// its message), stage 2 between them. Returns 0 with `trainer` set, or the exit code.
int set_up_trainer(const MpiEnv& env, const std::function<Config()>& load,
                   const std::string& resume, std::unique_ptr<Trainer>& trainer,
                   Trainer::Purpose purpose);

}  // namespace hpctrain
