// The epoch loop under strategy async (train/async_sgd.hpp): an epoch is trained in
// segments, each ending where a checkpoint by step count is due, at the epoch's end, or
// early on a stop signal or rank 0's clock. Workers train the batches they are handed;
// servers apply the workers' pushes; at each segment's end every rank holds the servers'
// model, so checkpoints and evaluation are those of the synchronous strategies.
#include <algorithm>
#include <cmath>

#include "core/timer.hpp"
#include "train/progress.hpp"
#include "train/signals.hpp"
#include "train/slow_rank.hpp"
#include "train/trainer.hpp"

namespace hpctrain {

int64_t Trainer::update_batch() const {
  // Known from the strategy, not from async_layout_, which set-up makes later than its first
  // use (the batch checkpoints record).
  return exchange_strategy(config_.distributed.strategy).decl.lockstep ? plan_.global_batch()
                                                                       : plan_.batch[0];
}

double Trainer::work_async_segment(int64_t begin, int64_t end, int epoch, int64_t first, double t0,
                                   Progress& progress) {
  const SlowRank slow(config_.debug.slow_rank, rank_);
  const int64_t epoch_begin = static_cast<int64_t>(epoch - 1) * steps_per_epoch_;
  const float grad_scale =
      exchange_->gradient_scale(plan_.batch[rank_], plan_.batch[rank_] * async_layout_->workers);
  double exchange_s = 0;
  async_->begin_work(begin, end, *train_loader_);
  while (const std::optional<int64_t> batch = async_->next_batch()) {
    global_step_ = *batch;  // numbers the batch's dropout masks
    const double compute = compute_gradients(grad_scale, /*timing=*/false, slow.active());
    slow.stretch(compute);
    const double t = now_seconds();
    const bool taken = async_->batch_done();
    exchange_s += now_seconds() - t;
    if (taken_flags_.size() > 0) {
      backend_->merge_loss_stats(stats_.data(), step_stats_.data(),
                                 taken_flags_.data() + (taken ? 0 : 1));
    }
    if (stop_signal() != 0) async_->note_stop();
    if (rank_ == 0 && checkpoints_->due_by_time(t)) async_->note_checkpoint_due();
    if (progress.due(t)) {
      // The batches handed out so far: this worker's estimate of everyone's progress, since
      // the epoch's first batch in this run (at t0), over the segments before this one too.
      LossStats s;
      backend_->copy_to_host(&s, stats_.data(), sizeof(s));
      const int64_t step = *batch - epoch_begin + 1;
      const int64_t done = *batch + 1 - first;
      const double elapsed = now_seconds() - t0;
      const double left = static_cast<double>(steps_per_epoch_ - step +
                                              static_cast<int64_t>(config_.train.epochs - epoch) *
                                                  steps_per_epoch_);
      progress.print(epoch, config_.train.epochs, step, steps_per_epoch_, s.loss_sum / s.count,
                     s.correct / s.count, static_cast<double>(done * plan_.batch[rank_]) / elapsed,
                     elapsed / static_cast<double>(done) * left, t);
    }
  }
  const double t = now_seconds();
  async_->end_work();
  return exchange_s + (now_seconds() - t);
}

Trainer::EpochEnd Trainer::train_epoch_async(int epoch, int64_t first_step, EpochMetrics& m,
                                             EpochTally& own) {
  const int64_t epoch_begin = static_cast<int64_t>(epoch - 1) * steps_per_epoch_;
  const int64_t epoch_end = epoch_begin + steps_per_epoch_;
  Progress progress(rank_ == 0, config_.train.progress_seconds);
  LossStats zero;
  backend_->copy_to_device(stats_.data(), &zero, sizeof(zero));
  const double wait0 = train_loader_ ? train_loader_->wait_seconds() : 0.0;
  const double t0 = now_seconds(), cpu0 = process_cpu_seconds();
  double exchange_s = 0;
  EpochEnd end = EpochEnd::kCompleted;
  global_step_ = epoch_begin + first_step;
  const int64_t first = global_step_;  // the epoch's first batch in this run, at t0
  while (global_step_ < epoch_end) {
    const int64_t begin = global_step_;
    const int64_t every = config_.checkpoint.every_steps;
    const int64_t segment_end =
        every > 0 ? std::min(epoch_end, (begin / every + 1) * every) : epoch_end;
    // The previous segment's checkpoint may still be copying the parameters and the
    // optimizer state that this segment's pulls and pushes change.
    checkpoints_->wait_snapshot();
    if (async_->is_server()) {
      async_->serve(begin, segment_end);
    } else {
      exchange_s += work_async_segment(begin, segment_end, epoch, first, t0, progress);
    }
    // A loss that is not finite ends the run at the segment's end (workers do not step
    // together: no per-step check), before a checkpoint of its parameters.
    const SegmentEnd e =
        async_->finish_segment(begin, stop_signal() != 0, backend_->loss_nonfinite(stats_.data()));
    global_step_ = e.cursor;
    const bool last = global_step_ == epoch_end;  // as in train_epoch: the row first
    if (e.diverged) {
      end = EpochEnd::kDiverged;
      break;
    }
    if (e.stop) {
      end = last ? EpochEnd::kStopAfter : EpochEnd::kStopped;
      break;
    }
    if (e.checkpoint || checkpoints_->due_by_steps(global_step_)) {
      if (last) {
        save_after_row_ = true;
      } else {
        keep_epoch_so_far(epoch, t0, wait0, exchange_s, cpu0);
        save_checkpoint(/*wait=*/false);
      }
    }
  }
  backend_->synchronize();
  const EpochTally figures = own_tally(t0, wait0, exchange_s, cpu0);
  const ServerStats mine = async_->take_server_stats();
  const double stats[6] = {static_cast<double>(mine.pushes),
                           static_cast<double>(mine.pulls),
                           static_cast<double>(mine.dropped),
                           mine.busy_s,
                           mine.cpu_s,
                           mine.bytes};
  std::vector<double> all(static_cast<size_t>(world_size_) * 6);
  {
    WatchdogScope w(*watchdog_, "epoch metrics reduction", global_step_);
    own = reduce_tally(*comm_, figures, tally_scratch_);
    comm_->allgather(stats, 6, all.data());
    staleness_.push_back(async_->take_staleness());
  }
  server_totals_.resize(static_cast<size_t>(async_layout_->servers));
  for (int i = 0; i < async_layout_->servers; ++i) {
    const double* v = all.data() + static_cast<size_t>(async_layout_->server_rank(i)) * 6;
    ServerStats& t = server_totals_[static_cast<size_t>(i)];
    t.pushes += static_cast<int64_t>(v[0]);
    t.pulls += static_cast<int64_t>(v[1]);
    t.dropped += static_cast<int64_t>(v[2]);
    t.busy_s += v[3];
    t.cpu_s += v[4];
    t.bytes += v[5];
    t.wall_s += own.train_s;
  }
  if (!std::isfinite(own.loss_sum)) end = EpochEnd::kDiverged;
  m.epoch = epoch;
  m.lr = schedule_->at(std::max<int64_t>(0, global_step_ - 1));
  return end;
}

AsyncReport Trainer::async_report(double samples) const {
  AsyncReport a;
  a.workers = async_layout_->workers;
  a.servers = async_layout_->servers;
  a.deterministic = config_.run.deterministic;
  a.staleness_per_epoch = staleness_;
  double bytes = 0;
  // Sized at the first epoch's end: a run that trains no epoch (resumed for its test phase)
  // has no server figures.
  for (size_t i = 0; i < server_totals_.size(); ++i) {
    const ServerStats& t = server_totals_[i];
    AsyncServerReport r;
    r.rank = async_layout_->server_rank(static_cast<int>(i));
    if (t.wall_s > 0) {
      r.pushes_per_second = static_cast<double>(t.pushes) / t.wall_s;
      r.pulls_per_second = static_cast<double>(t.pulls) / t.wall_s;
      r.busy_fraction = t.busy_s / t.wall_s;
      r.cpu_fraction = t.cpu_s / t.wall_s;
    }
    r.dropped = t.dropped;
    bytes += t.bytes;
    a.server_reports.push_back(r);
  }
  a.bytes_per_sample = samples > 0 ? bytes / samples : std::nan("");
  // A ring all-reduce sends 2 (n - 1) / n of the gradients from each of n ranks per step of
  // n batches.
  const double n = a.workers;
  const double grad_bytes = static_cast<double>(model_->param_count() * sizeof(float));
  a.allreduce_bytes_per_sample =
      2.0 * (n - 1.0) * grad_bytes / (n * static_cast<double>(plan_.batch[0]));
  return a;
}

}  // namespace hpctrain
