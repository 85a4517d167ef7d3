// What a run reports: a metrics.csv row per epoch and summary.json at the end
// (docs/contracts.md, "Run directory"). Written by rank 0 only.
#pragma once

#include <array>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain {

struct EpochMetrics {
  int epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  std::optional<double> val_loss, val_accuracy;
  double lr = 0;
  double time_train_s = 0, time_val_s = 0;
  double samples_per_second = 0;
  double data_wait_s = 0, comm_s = 0;  // slowest rank's
  double cpu_s = 0;                    // process CPU seconds of the epoch, mean over ranks
};

// The line rank 0 logs after an epoch: "epoch E/N  train loss ... acc ...  val loss ... acc
// ...  T s  S samples/s  data wait W%  comm C%", losses and accuracies rounded to 4 places.
std::string epoch_line(const EpochMetrics& m, int epochs);

class MetricsCsv {
 public:
  // Starts a new file with a header; or, resuming after `completed_epochs` whole epochs,
  // keeps the existing file's rows of those epochs only (a run killed after writing later
  // rows repeats those epochs) and appends after them.
  MetricsCsv(const std::string& path, std::optional<int> completed_epochs);
  void append(const EpochMetrics& m);  // one row, flushed and fsynced

 private:
  std::ofstream out_;
  std::string path_;
};

// Strategy async: what the servers did (summary.json "async").
struct AsyncServerReport {
  int rank = 0;
  double pushes_per_second = 0, pulls_per_second = 0;
  int64_t dropped = 0;
  double busy_fraction = 0;  // of the training time, handling messages
  double cpu_fraction = 0;   // process CPU time per second of training time
};

struct AsyncReport {
  int workers = 0, servers = 0;
  bool deterministic = false;
  // Per epoch of this run: pushes by staleness (entry s: computed from parameters s server
  // updates old), the last entry the pushes dropped as too stale.
  std::vector<std::vector<int64_t>> staleness_per_epoch;
  std::vector<AsyncServerReport> server_reports;
  double bytes_per_sample = 0;  // pushed and pulled, all servers
  // What a ring all-reduce of the gradients would move, as many ranks as workers with the
  // same batch each.
  double allreduce_bytes_per_sample = 0;
};

// The energy of this run's epochs (summary.json "energy"): per source the joules summed
// over the nodes, or null with the reason when a node could not read it.
struct EnergySummary {
  struct Source {
    std::optional<double> joules;
    std::string reason;
  };
  Source cpu, dram, gpu, gpu_active;  // gpu_active: the GPUs the ranks use, a part of gpu
  double seconds = 0;                 // sampled, the longest node's
  double samples = 0;                 // trained while sampling
  // In the order of kEnergySourceNames (train/energy.hpp).
  std::array<Source*, 4> sources() { return {&cpu, &dram, &gpu, &gpu_active}; }
  std::array<const Source*, 4> sources() const { return {&cpu, &dram, &gpu, &gpu_active}; }
};

struct RunSummary {
  std::string run_name, backend, strategy, algorithm, precision;
  std::string layout;  // how the backend stored activations with channels: nchw or nhwc
  int world_size = 1, threads_per_rank = 1, epochs_completed = 0;
  int64_t global_batch = 0, param_count = 0;
  std::vector<int64_t> rank_batches;  // each rank's batch (per micro-batch) at the end
  std::optional<double> test_loss, test_accuracy, val_loss, val_accuracy;
  double final_train_loss = 0, final_train_accuracy = 0;
  double samples_per_second = 0;
  double time_train_s = 0, time_val_s = 0, time_test_s = 0, time_total_s = 0;
  double data_wait_fraction = 0, comm_fraction = 0;
  // CPU seconds per second of training of a rank's process (compute and input threads,
  // waits included), the mean over the ranks; not under strategy async.
  std::optional<double> cpu_load_per_rank;
  std::optional<int64_t> resumed_from;
  int checkpoints_written = 0;
  double checkpoint_write_s = 0, checkpoint_blocked_s = 0;
  std::string params_sha256;
  // train.step_timing: seconds in forward (with the loss), backward, gradient exchange,
  // optimizer, and between steps (input, control, averaging, launch gaps).
  std::optional<std::array<double, 5>> step_phases_s;
  // precision fp16: the loss scale at the end, and the steps skipped because their
  // gradients overflowed (in this run, since its start or resume).
  std::optional<double> loss_scale;
  std::optional<int64_t> skipped_steps;
  // train.cuda_graph auto or on: the steps rank 0 replayed from a CUDA graph in this run.
  std::optional<int64_t> cuda_graph_steps;
  std::optional<AsyncReport> async;     // strategy async
  std::optional<EnergySummary> energy;  // energy.interval_ms > 0
  // The run's epochs across its resumes: what the checkpoint resumed from carried and
  // `energy` (samples 0: unknown); none where this run trained without sampling.
  std::optional<EnergySummary> energy_whole_run;
  // Provenance: the job's nodes (each once, in rank order); the Slurm ids of the job
  // (summary key -> value, only those Slurm set; empty outside Slurm); the run's wall-clock
  // start and end (utc_now()).
  std::vector<std::string> hosts;
  std::vector<std::pair<std::string, std::string>> slurm;
  std::string start_time, end_time;
};

// The Slurm ids of this process's job from its environment (SLURM_JOB_ID -> job_id,
// SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_RESTART_COUNT, SLURM_JOB_NAME,
// SLURM_CLUSTER_NAME), those that are set.
std::vector<std::pair<std::string, std::string>> slurm_ids();

std::string summary_to_json(const RunSummary& s);
// x with enough digits to round-trip, or null when it is NaN or infinite.
std::string json_number(double x);

}  // namespace hpctrain
