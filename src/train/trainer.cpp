// The epoch loop. One training step on one rank (docs/architecture.md):
//   1. pop the next prefetched batch (its wait is data_wait),
//   2. forward, softmax cross-entropy, backward on the rank's Backend,
//   3. the exchange strategy's hooks around backward and the optimizer (train/exchange.hpp),
//   4. the optimizer step with the scheduled learning rate,
//   5. a three-flag all-reduce so all ranks agree on stopping (a signal), on a
//      time-based checkpoint and on a loss that is not finite, at the same step.
// Nothing in the step allocates, synchronises the device or logs but rank 0's progress line.
#include "train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <limits>

#include "checkpoint/checkpoint_store.hpp"
#include "comm/agreement.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/host.hpp"
#include "core/log.hpp"
#include "core/random.hpp"
#include "core/timer.hpp"
#include "train/progress.hpp"
#include "train/signals.hpp"
#include "train/slow_rank.hpp"

namespace hpctrain {
namespace {

// Steps of each epoch whose forward and backward balance auto times.
constexpr int64_t kMeasuredSteps = 20;

// The job's node names, each once, in rank order. Collective.
std::vector<std::string> job_hosts(Communicator& comm) {
  std::vector<std::string> hosts;
  for (std::string& host : comm.allgather(host_name())) {
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}

}  // namespace

Trainer::~Trainer() = default;

void Trainer::forward_backward(const BatchStager::Input& in, int64_t batch, float grad_scale,
                               bool timing, int micro, int k) {
  if (timing && micro == 0) backend_->phase_mark(0);
  const Tensor& logits =
      model_->forward(in.images, batch, /*training=*/true,
                      mix_seed(config_.run.seed, rank_, global_step_ * k + micro));
  if (micro == 0 && rank_ == 0 && !nonfinite_steps_.empty() &&
      std::binary_search(nonfinite_steps_.begin(), nonfinite_steps_.end(), global_step_)) {
    backend_->scale(static_cast<float*>(logits.data), 1, std::numeric_limits<float>::quiet_NaN());
  }
  backend_->softmax_xent(logits.data, in.labels, static_cast<int>(batch * labels_per_sample_),
                         num_classes_, grad_scale / static_cast<float>(labels_per_sample_),
                         scaler_ ? scaler_->scale() : nullptr, model_->dlogits(),
                         step_stats_.size() > 0 ? step_stats_.data() : stats_.data());
  if (timing && micro + 1 == k) backend_->phase_mark(1);
  // A strategy may exchange gradients while backward goes on; the exchange phase is then
  // what is left of it after backward (the exposed communication). Summed micro-batches
  // are exchanged once complete.
  model_->backward(k == 1 ? exchange_->before_backward() : nullptr);
}

bool Trainer::replay_step(const BatchStager::Input& in, int64_t batch, float grad_scale,
                          bool timing) {
  if (!graphs_allowed_ || batch != plan_.batch[rank_]) return false;
  for (const StepGraph& g : step_graphs_) {
    if (g.images == in.images && g.labels == in.labels && g.batch == batch &&
        g.grad_scale == grad_scale && g.timing == timing) {
      backend_->replay(g.id);
      ++graph_steps_;
      return true;
    }
  }
  // Two eager steps at each batch size first (balance auto changes it): they make the
  // plans and choose the algorithms, work that cannot be recorded.
  if (batch != graph_candidate_batch_) {
    graph_candidate_batch_ = batch;
    graph_candidates_ = 0;
  }
  if (++graph_candidates_ <= 2) return false;
  constexpr size_t kMaxStepGraphs = 8;  // two input slots for each of a few batch plans
  if (step_graphs_.size() >= kMaxStepGraphs) {
    backend_->drop_graphs();
    step_graphs_.clear();
  }
  // The compute copy of the weights is converted at the start of every replay: the
  // recording must hold that conversion, so it starts with the weights marked changed.
  model_->mutable_params();
  int id = -1;
  try {
    backend_->begin_capture();
    forward_backward(in, batch, grad_scale, timing, 0, 1);
    id = backend_->end_capture();
  } catch (const std::exception& e) {  // Error, and the kernels' launch failures
    backend_->abort_capture();
    model_->mutable_params();  // nothing recorded ran: convert again when run eagerly
    if (config_.train.cuda_graph == "on") {
      throw Error(std::string("train.cuda_graph: on, but recording a step failed: ") + e.what());
    }
    log_warn(std::string("train.cuda_graph auto: recording a step failed; steps run eagerly: ") +
             e.what());
    graphs_allowed_ = false;
    return false;
  }
  step_graphs_.push_back({in.images, in.labels, batch, grad_scale, timing, id});
  backend_->replay(id);
  ++graph_steps_;
  return true;
}

double Trainer::compute_gradients(float grad_scale, bool timing, bool measure) {
  const int k = plan_.accumulate;
  float* grads = model_->grads();
  const size_t n = model_->param_count();
  const bool sync = measure && !backend_->host_accessible();
  double seconds = 0;
  for (int micro = 0; micro < k; ++micro) {
    const BatchBuffer& b = train_loader_->next();
    const BatchStager::Input in = stager_->stage(*train_loader_, b);
    if (sync) backend_->synchronize();
    const double t0 = measure ? now_seconds() : 0.0;
    if (k != 1 || !replay_step(in, b.size, grad_scale, timing)) {
      forward_backward(in, b.size, grad_scale, timing, micro, k);
    }
    if (sync) backend_->synchronize();
    if (measure) seconds += now_seconds() - t0;
    stager_->release();
    if (k == 1) continue;
    if (micro == 0) {
      backend_->copy(grads, accumulated_.data(), n * sizeof(float));
    } else if (micro + 1 < k) {
      backend_->accumulate(accumulated_.data(), grads, n);
    } else {
      backend_->accumulate(grads, accumulated_.data(), n);
    }
  }
  return seconds;
}

Trainer::EpochEnd Trainer::train_epoch(int epoch, int64_t first_step, EpochMetrics& m,
                                       EpochTally& own) {
  const int64_t global_batch = plan_.global_batch();
  const float grad_scale =
      exchange_->gradient_scale(plan_.batch[rank_] * plan_.accumulate, global_batch);
  const bool timing = config_.train.step_timing;
  const SlowRank slow(config_.debug.slow_rank, rank_);
  Progress progress(rank_ == 0, config_.train.progress_seconds);
  LossStats zero;
  backend_->copy_to_device(stats_.data(), &zero, sizeof(zero));
  {  // Every rank's clock starts at once: rank 0 alone wrote the last epoch's row and
     // checkpoint, which the others would count as training (one rank keeps it out).
    WatchdogScope w(*watchdog_, "the epoch's start", global_step_);
    comm_->barrier();
  }
  comm_->reset_comm_seconds();
  const double wait0 = train_loader_->wait_seconds();
  const double t0 = now_seconds(), cpu0 = process_cpu_seconds();
  double lr = schedule_->at(global_step_);
  EpochEnd end = EpochEnd::kCompleted;

  for (int64_t step = first_step; step < steps_per_epoch_; ++step) {
    // The whole step under the watchdog (its collectives have scopes of their own): a
    // reader thread that never delivers, or device work that never ends (a GPU collective
    // waiting for a peer), stops the job as a hung collective does.
    WatchdogScope watched(*watchdog_, "training step (data, compute and device work)",
                          global_step_);
    // Balance auto times some steps of each epoch (not its first: a new loader's).
    const bool balance = meter_ && step > first_step && step <= first_step + kMeasuredSteps;
    const double compute = compute_gradients(grad_scale, timing, balance || slow.active());
    const double slept = slow.stretch(compute);
    if (balance) meter_->add(compute + slept, plan_.batch[rank_] * plan_.accumulate);
    if (timing) backend_->phase_mark(2);
    exchange_->after_backward(global_step_);
    if (timing) backend_->phase_mark(3);
    lr = schedule_->at(global_step_);
    if (scaler_) {
      for (const ParamRange& r : trainable_) scaler_->unscale(model_->grads() + r.offset, r.count);
    }
    if (clipper_) clipper_->clip(model_->grads(), trainable_);
    checkpoints_->wait_snapshot();  // a checkpoint may still be copying the parameters
    optimizer_->step(model_->mutable_params(), model_->grads(), lr,
                     scaler_ ? scaler_->skip() : nullptr);
    if (skip_nonfinite_) {
      backend_->merge_loss_stats(stats_.data(), step_stats_.data(), scaler_->skip());
    }
    if (scaler_) scaler_->update();
    if (timing) backend_->phase_mark(4);
    ++global_step_;
    exchange_->after_optimizer(global_step_, step + 1 == steps_per_epoch_);
    bool checkpoint_now = false;
    bool diverged = backend_->loss_nonfinite(stats_.data());
    bool stop = false;
    {
      WatchdogScope w(*watchdog_, "control all-reduce", global_step_);
      stop = agree_on_control(checkpoint_now, diverged);
    }
    if (diverged) {
      end = EpochEnd::kDiverged;
      break;
    }
    // At the epoch's last step a checkpoint, and a stop, wait for its row (metrics.csv):
    // a resume from the end of an epoch never runs that epoch again.
    const bool last = step + 1 == steps_per_epoch_;
    if (stop) {
      end = last ? EpochEnd::kStopAfter : EpochEnd::kStopped;
      break;
    }
    if (checkpoint_now || checkpoints_->due_by_steps(global_step_)) {
      if (last) {
        save_after_row_ = true;
      } else {
        keep_epoch_so_far(epoch, t0, wait0, comm_->comm_seconds(), cpu0);
        save_checkpoint(/*wait=*/false);
      }
    }
    if (progress.due(now_seconds())) {
      LossStats s;
      backend_->copy_to_host(&s, stats_.data(), sizeof(s));
      const double now = now_seconds();
      const double done = static_cast<double>(step + 1 - first_step);
      const double left = static_cast<double>(steps_per_epoch_ - step - 1 +
                                              static_cast<int64_t>(config_.train.epochs - epoch) *
                                                  steps_per_epoch_);
      progress.print(epoch, config_.train.epochs, step + 1, steps_per_epoch_, s.loss_sum / s.count,
                     s.correct / s.count, done * static_cast<double>(global_batch) / (now - t0),
                     (now - t0) / done * left, now);
    }
  }
  {
    WatchdogScope w(*watchdog_, "the epoch's last device work", global_step_);
    backend_->synchronize();
  }
  // The slowest rank sets the pace.
  const EpochTally mine = own_tally(t0, wait0, comm_->comm_seconds(), cpu0);
  PhaseSeconds phases{};
  if (timing) phases = backend_->take_phases();
  {
    WatchdogScope w(*watchdog_, "epoch metrics reduction", global_step_);
    own = reduce_tally(*comm_, mine, tally_scratch_);
    if (timing) comm_->allreduce_max(phases.data(), kPhaseMarks);
  }
  for (int i = 0; i < kPhaseMarks; ++i) phase_totals_[i] += phases[i];
  // A device backend's per-step answer may come late; the epoch's sum is exact (and the
  // same on every rank).
  if (!std::isfinite(own.loss_sum)) end = EpochEnd::kDiverged;
  m.epoch = epoch;
  m.lr = lr;
  return end;
}

void Trainer::save_checkpoint(bool wait) {
  if (sampling_) keep_energy_so_far();
  exchange_->sync_for_evaluation(global_step_);
  WatchdogScope w(*watchdog_, "checkpoint", global_step_);
  checkpoints_->save(*comm_, global_step_, wait);
}

void Trainer::connect() {
  WatchdogScope w(*watchdog_, "choice of collectives", 0);
  collectives_ = std::make_unique<ModelCollectives>(
      config_.source_file, config_.distributed.algorithm, *backend_, *comm_,
      std::max(model_->param_count(), model_->state_count()));
  exchange_ = exchange_strategy(config_.distributed.strategy)
                  .make({config_, *model_, trainable_, *collectives_, *watchdog_});
  if (async_layout_) {
    async_ = std::make_unique<AsyncSgd>(
        AsyncContext{config_, *async_layout_, *comm_, *backend_, *model_, *optimizer_,
                     [this](int64_t batch) { return schedule_->at(batch); }, *watchdog_});
  }
}

int Trainer::stop_run() {
  if (checkpoints_->last_saved_step() != global_step_) save_checkpoint(/*wait=*/true);
  checkpoints_->finish();
  {
    WatchdogScope w(*watchdog_, "stop barrier", global_step_);
    comm_->barrier();
  }
  if (rank_ == 0) {
    // mpiexec (MPICH hydra 4.0) sometimes reports 0 instead of the ranks' 75 when it
    // forwarded the signal; job scripts also look for this marker.
    write_file_atomic(stopped_marker(), "step " + std::to_string(global_step_) + "\ncheckpoint " +
                                            checkpoints_->stats().last_path + "\n");
  }
  log_info("stopped by a signal at step " + std::to_string(global_step_) +
           " after committing a checkpoint; resume with --resume auto");
  return kExitStopped;
}

int Trainer::run() {
  const double run_t0 = now_seconds();
  const std::string start_time = utc_now();
  connect();
  if (graphs_allowed_ && exchange_->overlaps_backward()) {  // the same on every rank
    const std::string why = "train.cuda_graph: " + config_.train.cuda_graph +
                            ", but the gradient exchange overlaps backward "
                            "(distributed.algorithm nccl buckets)";
    if (config_.train.cuda_graph == "on") {
      if (rank_ == 0) log_error(config_.source_file + ": " + why);
      return kExitUsage;
    }
    log_info(why + ": steps run eagerly");
    graphs_allowed_ = false;
  }
  install_stop_signals();
  exchange_->start();

  // 1. Resume: rank 0 hands the prepared checkpoint to everyone; then each rank
  //    reads its shards.
  RunSummary summary;
  int code = 0;
  {
    WatchdogScope w(*watchdog_, "start-up (resume and data loading)", 0);
    summary.resumed_from = checkpoints_->restore(*comm_);
    global_step_ = checkpoints_->start_step();
    take_carried(summary.resumed_from.has_value());
    if (already_complete()) return kExitOk;
    if (meter_) plan_restored_batches();
    // Every rank's checks first (its data rows included): a start refused on any rank leaves
    // the earlier run's files as they were.
    code = run_and_agree(comm_->get(), [&] {
      if (rank_ == 0) checkpoints_->check_directory();
      checkpoints_->reserve_memory();
      create_loaders(global_step_, /*training=*/true);
    });
    if (code != 0) return code;
    code = run_and_agree(comm_->get(), [&] {
      if (rank_ == 0) {
        std::error_code ec;  // an old STOPPED; an earlier, shorter run's summary
        std::filesystem::remove(stopped_marker(), ec);
        std::filesystem::remove(config_.run.dir + "/summary.json", ec);
        // Records of checkpoints a killed writer never committed (docs/formats.md).
        forget_missing_checkpoints(config_.checkpoint.dir, "tidying it at start-up");
        write_file_atomic(config_.run.dir + "/config.yaml", config_to_yaml(config_));
        std::optional<int> completed;
        if (summary.resumed_from) completed = static_cast<int>(global_step_ / steps_per_epoch_);
        metrics_csv_ = std::make_unique<MetricsCsv>(config_.run.dir + "/metrics.csv", completed);
      }
    });
  }
  if (code != 0) return code;
  if (summary.resumed_from) {  // after the last epoch: "of epoch 3" of 2 named none
    log_info(global_step_ >= steps_per_epoch_ * config_.train.epochs
                 ? std::string("resuming after the last epoch: the test phase only")
                 : "resuming at step " + std::to_string(global_step_ % steps_per_epoch_) +
                       " of epoch " + std::to_string(global_step_ / steps_per_epoch_ + 1));
  }

  const std::string backend = backend_->name();  // and the CPU staging as a GPU (for tests)
  log_info(
      "hpctrain: " + std::to_string(world_size_) + " rank(s) x " + std::to_string(threads_) +
      " thread(s), backend " + backend +
      (backend == "cpu" && !backend_->host_accessible() ? " (memory staged as on a GPU)" : "") +
      ", " + std::to_string(model_->param_count()) + " parameters, " +
      std::to_string(steps_per_epoch_) + " steps/epoch, " +
      (async_layout_ ? "batch " + std::to_string(update_batch()) + " per worker, " +
                           std::to_string(async_layout_->servers) + " parameter server(s)"
                     : "global batch " + std::to_string(update_batch())));

  // 2. Epochs (energy sampled around them, where this run trains any).
  double total_train = 0, total_val = 0, total_wait = 0, total_comm = 0, total_cpu = 0;
  double total_samples = 0;
  const int first_epoch = static_cast<int>(global_step_ / steps_per_epoch_) + 1;
  const bool trains = first_epoch <= config_.train.epochs;
  if (trains) start_energy();
  summary.epochs_completed = first_epoch - 1;
  bool diverged = false, warned_checkpoints = false;
  for (int epoch = first_epoch; epoch <= config_.train.epochs && !diverged; ++epoch) {
    EpochMetrics m;
    EpochTally own;  // this run's; the row adds those a checkpoint carried
    const double blocked_before = checkpoints_->stats().blocked_seconds;
    const int64_t first_step = global_step_ - static_cast<int64_t>(epoch - 1) * steps_per_epoch_;
    const EpochEnd ended = async_ ? train_epoch_async(epoch, first_step, m, own)
                                  : train_epoch(epoch, first_step, m, own);
    EpochTally whole = carried(epoch);
    whole += own;
    diverged = ended == EpochEnd::kDiverged;
    const bool complete = ended == EpochEnd::kCompleted || ended == EpochEnd::kStopAfter;
    if (complete && !params_finite()) {  // activations hid it from the loss
      diverged = true;
      divergence_ = "the parameters are not finite at the end of the epoch, though the loss is";
    }
    if (scaler_ && complete) {
      const int64_t steps = steps_per_epoch_ - first_step;
      const int64_t skipped = scaler_->end_epoch(steps, rank_ == 0);
      skipped_steps_ += skipped;
      if ((scaler_->fixed() || skip_nonfinite_) && steps > 0 && skipped == steps) {
        // Every update was left out: the parameters no longer give finite gradients.
        diverged = true;
        divergence_ = "every step of the epoch had gradients that were not finite and was skipped";
      }
    }
    if (ended == EpochEnd::kStopped) {
      encode_tally(epoch, whole, epoch_so_far_);
      return stop_run();
    }
    if (meter_ && epoch < config_.train.epochs && !diverged) rebalance(global_step_);
    total_train += own.train_s;
    total_wait += own.wait_s;
    total_comm += own.comm_s;
    total_cpu += own.cpu_s;
    total_samples += own.count / static_cast<double>(labels_per_sample_);
    fill_training_metrics(whole, labels_per_sample_, m);
    // A stop agreed on at the epoch's last step, or a signal during its validation (not
    // the last epoch's, which finishes the run), stops at the epoch's end.
    bool stop_after = ended == EpochEnd::kStopAfter;
    if (val_loader_ && !diverged &&
        (epoch % config_.train.val_every == 0 || epoch == config_.train.epochs)) {
      exchange_->sync_for_evaluation(global_step_);
      const double t0 = now_seconds();
      const EvalResult v =
          evaluate(*val_loader_, "validation", /*stoppable=*/epoch < config_.train.epochs);
      stop_after = stop_after || v.stop;
      if (v.cut_short) {
        log_info("validation of epoch " + std::to_string(epoch) +
                 " cut short by a stop signal: the epoch has no validation figures");
      } else {
        m.time_val_s = now_seconds() - t0;
        total_val += m.time_val_s;
        m.val_loss = v.loss;
        m.val_accuracy = v.accuracy;
        summary.val_loss = v.loss;
        summary.val_accuracy = v.accuracy;
      }
    }
    log_info(epoch_line(m, config_.train.epochs));
    // Checkpoints due faster than they are written hold the steps back (once a run).
    const double blocked = checkpoints_->stats().blocked_seconds - blocked_before;
    if (rank_ == 0 && !warned_checkpoints && own.train_s > 1.0 && blocked > 0.25 * own.train_s) {
      warned_checkpoints = true;
      char text[240];
      std::snprintf(text, sizeof(text),
                    "checkpoints held training back for %.1f s of epoch %d's %.1f s: they fall "
                    "due faster than they are written; checkpoint less often",
                    blocked, epoch, own.train_s);
      log_warn(text);
    }
    if (metrics_csv_) metrics_csv_->append(m);
    encode_tally(epoch + 1, EpochTally{}, epoch_so_far_);  // what the epoch's checkpoint carries
    // The epoch's checkpoint after its row: killed in between, the resumed run trains the
    // end of the epoch again and writes the row itself.
    if ((config_.checkpoint.at_epoch_end || save_after_row_) && !diverged &&
        checkpoints_->last_saved_step() != global_step_) {
      save_checkpoint(/*wait=*/false);
    }
    save_after_row_ = false;
    if (stop_after && !diverged) return stop_run();
    summary.final_train_loss = m.train_loss;
    summary.final_train_accuracy = m.train_accuracy;
    if (!diverged) summary.epochs_completed = epoch;
  }
  if (trains) summary.energy = finish_energy(total_samples);
  summary.energy_whole_run = whole_run_energy(summary.energy, trains);
  // 4. The final state is always checkpointed (for eval, export, model.init_from and
  //    already_complete()) and committed before the test phase: a run killed during its test
  //    resumes for the test alone.
  if (!diverged && checkpoints_->last_saved_step() != global_step_) {
    save_checkpoint(/*wait=*/false);
  }
  checkpoints_->finish();
  if (test_loader_ && !diverged) {
    exchange_->sync_for_evaluation(global_step_);
    const double t0 = now_seconds();
    const EvalResult t = evaluate(*test_loader_, "test");
    summary.time_test_s = now_seconds() - t0;
    summary.test_loss = t.loss;
    summary.test_accuracy = t.accuracy;
    char line[128];
    std::snprintf(line, sizeof(line), "test loss %.4f acc %.4f", t.loss, t.accuracy);
    log_info(line);
  }

  summary.run_name = config_.run.name;
  summary.backend = backend_->name();
  summary.strategy = config_.distributed.strategy;
  summary.algorithm = exchange_->algorithm();
  summary.precision = to_string(config_.precision);
  summary.layout = backend_->channels_last() ? "nhwc" : "nchw";
  if (scaler_) {
    if (!scaler_->fixed()) summary.loss_scale = scaler_->current_scale();
    summary.skipped_steps = skipped_steps_;
  }
  if (config_.train.cuda_graph != "off") summary.cuda_graph_steps = graph_steps_;
  summary.world_size = world_size_;
  summary.threads_per_rank = threads_;
  summary.global_batch = update_batch();
  summary.rank_batches = plan_.batch;
  if (async_layout_) async_layout_->zero_servers(summary.rank_batches);
  summary.param_count = static_cast<int64_t>(model_->param_count());
  summary.samples_per_second = total_train > 0 ? total_samples / total_train : 0;
  summary.time_train_s = total_train;
  summary.time_val_s = total_val;
  summary.data_wait_fraction = total_train > 0 ? total_wait / total_train : 0;
  summary.comm_fraction = total_train > 0 ? total_comm / total_train : 0;
  if (!async_ && total_train > 0) summary.cpu_load_per_rank = total_cpu / total_train;
  const CheckpointWriteStats ck = checkpoints_->stats();
  summary.checkpoints_written = ck.writes;
  summary.checkpoint_write_s = ck.write_seconds;
  summary.checkpoint_blocked_s = ck.blocked_seconds;
  summary.params_sha256 = model_->params_sha256();
  if (config_.train.step_timing && !async_) summary.step_phases_s = phase_totals_;
  if (async_) summary.async = async_report(total_samples);
  {
    WatchdogScope w(*watchdog_, "gathering the host names", global_step_);
    summary.hosts = job_hosts(*comm_);
  }
  summary.slurm = slurm_ids();
  summary.start_time = start_time;
  summary.end_time = utc_now();
  summary.time_total_s = now_seconds() - run_t0;
  if (rank_ == 0) write_summary(summary);
  if (diverged) {
    // Training cannot go on from non-finite parameters; the checkpoints kept are from
    // before (the writer refuses parameters that are not finite).
    const std::string last = ck.last_path.empty() ? "none was written" : ck.last_path;
    if (rank_ == 0) {
      if (divergence_.empty()) {
        divergence_ = "the loss is not finite by step " + std::to_string(global_step_);
      }
      log_error("training diverged: " + divergence_ + " (epoch " +
                std::to_string((global_step_ - 1) / steps_per_epoch_ + 1) +
                "); the newest checkpoint: " + last +
                "; lower optimizer.lr or set optimizer.clip_grad_norm");
    }
    return kExitFailure;
  }
  return kExitOk;
}

bool Trainer::agree_on_control(bool& checkpoint_now, bool& diverged) {
  // [0]: some rank got a stop signal; [1]: rank 0's clock says a checkpoint is due; [2]:
  // some rank's loss is not finite.
  double flags[3] = {stop_signal() != 0 ? 1.0 : 0.0,
                     rank_ == 0 && checkpoints_->due_by_time(now_seconds()) ? 1.0 : 0.0,
                     diverged ? 1.0 : 0.0};
  if (world_size_ > 1) comm_->allreduce_max(flags, 3);
  checkpoint_now = flags[1] > 0.0;
  diverged = flags[2] > 0.0;
  return flags[0] > 0.0;
}

std::string Trainer::stopped_marker() const { return config_.run.dir + "/STOPPED"; }

void Trainer::write_summary(const RunSummary& summary) {
  const std::string path = config_.run.dir + "/summary.json";
  write_file_atomic(path, summary_to_json(summary));
  log_info("wrote " + path + " (params_sha256 " + summary.params_sha256.substr(0, 16) + "...)");
}

}  // namespace hpctrain
