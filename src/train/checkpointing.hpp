// Moves the training state between the live model/optimizer and checkpoint
// files: finding what to resume from, restoring it on every rank (also with a
// different number of ranks), and capturing it for the background writer.
// Rank 0 reads and writes files; the other ranks receive and send over MPI.
// Used from the training thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "checkpoint/async_writer.hpp"
#include "checkpoint/checkpoint_store.hpp"
#include "comm/communicator.hpp"
#include "config/config.hpp"
#include "nn/model.hpp"
#include "optim/optimizer.hpp"
#include "train/loss_scaler.hpp"

namespace hpctrain {

// The shape of the job a checkpoint records and restores against.
struct JobShape {
  int rank = 0, world_size = 1;
  int64_t steps_per_epoch = 0;  // optimizer steps
  int64_t global_batch = 0;     // samples of one optimizer step over all ranks
  // One copy of the parameters and optimizer state is stored (else each rank's;
  // StrategyDecl::one_stored_state).
  bool one_stored_state = true;
};

// --resume auto:PATH: the newest valid checkpoint of checkpoint.dir, else PATH (what the job
// scripts give a requeued run whose first run was given --resume PATH).
inline constexpr const char* kResumeAutoElse = "auto:";

class TrainingCheckpoints {
 public:
  // scaler: the loss scaler of precision fp16, else null.
  TrainingCheckpoints(const Config& config, Model& model, Optimizer& optimizer, LossScaler* scaler,
                      const JobShape& job);
  ~TrainingCheckpoints();

  // An array of the trainer's, the same on every rank, saved with every checkpoint under
  // `name` and, by restore(), set from the checkpoint's (emptied when it has none).
  // `values` outlives this object.
  void keep_array(const char* name, std::vector<float>* values);

  // Local (rank 0 only does work): picks the checkpoint `resume` names ("auto":
  // the newest valid one; "never": none, and refuses a directory that already
  // holds checkpoints; "auto:PATH": the newest valid one, else PATH; else a path) and
  // checks that its model matches. For a run that
  // will write checkpoints (`writes`), refuses a directory that holds another run's.
  // Throws UsageError.
  void prepare_resume(const std::string& resume, bool writes);

  // Collective: hands the prepared checkpoint to every rank and loads it.
  // Returns the checkpoint's step, or nullopt for a fresh start.
  std::optional<int64_t> restore(Communicator& comm);
  // Rank 0, after prepare_resume: whether restore() loads a checkpoint.
  bool resuming() const { return resume_.has_value(); }
  // The global step training continues from (0 for a fresh start).
  int64_t start_step() const { return start_step_; }

  // Whether a cadence asks for checkpoints during training (the final state and a stop's
  // are checkpointed either way).
  bool enabled() const;
  // Rank 0 at start-up: checkpoint.dir (made at set-up, Trainer::prepare) can be written to
  // and has room for checkpoint.keep + 1 checkpoints (those kept and one being written; 2 without a
  // cadence); throws UsageError naming the key and what is wrong, so a run does not find out at its
  // first checkpoint.
  void check_directory() const;
  // Whether the cadence (every_steps) asks for a checkpoint after `global_step`.
  bool due_by_steps(int64_t global_step) const;
  // Rank 0's clock: whether every_seconds have passed since the last checkpoint.
  bool due_by_time(double now) const;

  // At start-up, before training: allocates (and touches) the host memory that save()
  // fills: rank 0's copy of the state, and a strategy average's gather buffers. Throws
  // UsageError naming it and its size where it cannot be allocated, so that a run does not
  // find out at its first checkpoint, and save() allocates nothing.
  void reserve_memory();
  // The bytes reserve_memory() takes on `job`'s rank for a model of `params` parameters
  // and `state` values of model state, with `per_parameter_slots` optimizer arrays saved.
  static double reserved_bytes(const JobShape& job, size_t params, size_t state,
                               int per_parameter_slots);

  // Collective: captures the state after `global_step` steps; rank 0 queues it
  // for writing and, if `wait`, waits until it is committed. Rank 0's live
  // parameters and optimizer state may still be being copied when this returns: call
  // wait_snapshot() before modifying them.
  void save(Communicator& comm, int64_t global_step, bool wait);
  // Returns once the live arrays of the last save() are copied; cheap otherwise.
  void wait_snapshot();
  int64_t last_saved_step() const { return last_saved_step_; }
  // Waits for the write in flight (rank 0); rethrows its error.
  void finish();
  // Waits for the write in flight (rank 0); its error comes at the next save() or finish().
  void wait_idle();
  // Rank 0's write statistics; blocked_seconds is the training thread's time in
  // save() and wait_snapshot().
  CheckpointWriteStats stats() const;

 private:
  const Config& config_;
  Model& model_;
  const std::vector<OptimizerSlot> slots_;  // the optimizer's state arrays
  LossScaler* scaler_;
  int rank_, world_size_;
  int64_t steps_per_epoch_, global_batch_;
  bool per_rank_state_;  // the ranks' parameters and optimizer state differ
  const std::string config_yaml_, architecture_;  // made once, stored in every checkpoint
  std::optional<LoadedCheckpoint> resume_;        // rank 0, between prepare and restore
  int64_t start_step_ = 0;
  int64_t last_saved_step_ = -1;
  double last_save_time_;
  double blocked_seconds_ = 0;                      // rank 0's training-thread time inside save()
  std::unique_ptr<AsyncCheckpointWriter> writer_;   // rank 0
  std::vector<float> send_buffer_, gather_buffer_;  // strategy average, reused
  std::vector<SnapshotSource> sources_;             // rank 0: save()'s live arrays, reused
  std::string array_key_;                           // rank 0: save()'s per-rank array names
  std::vector<std::pair<const char*, std::vector<float>*>> kept_;  // keep_array()
};

}  // namespace hpctrain
