// Strategy async: the layout of servers and slices, the ticket counter, and the end of a
// segment (the collective that makes every rank hold the servers' model). The worker's
// side is in async_worker.cpp, the server's in async_server.cpp.
#include "train/async_sgd.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "comm/mpi_check.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/sampler.hpp"
#include "train/async_parts.hpp"

namespace hpctrain {

namespace async_wire {

void IdlePoll::idle() {
  // Busy polls for 100 us answer a peer that is about to send and keep a large message
  // moving (MPI needs both sides' progress); then polls that yield the core to any other
  // runnable process for 2 ms (a step's worth); then sleeps of 50 us between polls.
  const double now = now_seconds();
  if (polls_++ == 0) since_ = now;
  const double idle = now - since_;
  if (idle < 100e-6) return;
  if (idle < 2e-3) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void wait(MPI_Request& request) {
  IdlePoll poll;
  for (;;) {
    int done = 0;
    HT_CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    poll.idle();
  }
}

}  // namespace async_wire

AsyncLayout async_layout(const std::string& config_file, int world_size, int servers,
                         size_t param_count) {
  if (servers >= world_size) {
    throw UsageError(config_file + ": distributed.parameter_servers: " + std::to_string(servers) +
                     " leaves no worker: this job has " + std::to_string(world_size) +
                     " rank(s), and the servers must be fewer");
  }
  AsyncLayout layout;
  layout.workers = world_size - servers;
  layout.servers = servers;
  const std::vector<int64_t> counts =
      apportion(static_cast<int64_t>(param_count), std::vector<int64_t>(servers, 1));
  size_t offset = 0;
  for (int64_t c : counts) {
    layout.slices.push_back({offset, static_cast<size_t>(c)});
    offset += static_cast<size_t>(c);
  }
  return layout;
}

std::vector<ParamRange> ranges_within(const std::vector<ParamRange>& trainable, ParamRange slice) {
  std::vector<ParamRange> out;
  const size_t lo = slice.offset, hi = slice.offset + slice.count;
  for (const ParamRange& r : trainable) {
    const size_t a = std::max(lo, r.offset), b = std::min(hi, r.offset + r.count);
    if (a < b) out.push_back({a, b - a});
  }
  return out;
}

AsyncSgd::AsyncSgd(const AsyncContext& context) : ctx_(context), rank_(context.comm.rank()) {
  const AsyncLayout& l = ctx_.layout;
  if (l.is_server(rank_)) {
    server_ = rank_ - l.workers;
    server_state_ = std::make_unique<Server>(ctx_, server_);
  } else {
    worker_ = std::make_unique<Worker>(ctx_);
  }
  if (!ctx_.config.run.deterministic) {
    // The first server holds the counter of the batches handed out in a segment.
    const MPI_Aint bytes = rank_ == l.server_rank(0) ? sizeof(int64_t) : 0;
    HT_CHECK_MPI(MPI_Win_allocate(bytes, sizeof(int64_t), MPI_INFO_NULL, ctx_.comm.get(), &counter_,
                                  &counter_win_));
    if (bytes > 0) *counter_ = 0;
    HT_CHECK_MPI(MPI_Barrier(ctx_.comm.get()));
    if (worker_) worker_->counter_win = counter_win_;
    if (server_state_) server_state_->counter_win = counter_win_;
  }
}

AsyncSgd::~AsyncSgd() {
  if (counter_win_ != MPI_WIN_NULL) MPI_Win_free(&counter_win_);
}

void AsyncSgd::begin_work(int64_t begin, int64_t end, Loader& loader) {
  worker_->begin(begin, end, loader);
}
std::optional<int64_t> AsyncSgd::next_batch() { return worker_->next_batch(); }
bool AsyncSgd::batch_done() { return worker_->batch_done(); }
void AsyncSgd::note_stop() { worker_->note(async_parts::kStopBit, async_wire::kStopSeen); }
void AsyncSgd::note_checkpoint_due() {
  worker_->note(async_parts::kCheckpointBit, async_wire::kCheckpointSeen);
}
void AsyncSgd::end_work() { worker_->end(); }
void AsyncSgd::serve(int64_t begin, int64_t end) { server_state_->serve(begin, end); }

SegmentEnd AsyncSgd::finish_segment(int64_t begin, bool stop, bool diverged) {
  // [0] the first batch not trained, [1] stop, [2] checkpoint by time, [3] diverged.
  double v[4] = {static_cast<double>(begin), stop ? 1.0 : 0.0, 0, diverged ? 1.0 : 0.0};
  if (worker_) v[0] = static_cast<double>(std::max(begin, worker_->taken_end));
  if (server_ == 0 && counter_ != nullptr) {
    HT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank_, 0, counter_win_));
    const int64_t flags = *counter_ >> async_parts::kCheckpointShift;
    *counter_ = 0;  // the next segment's batches count from its start
    HT_CHECK_MPI(MPI_Win_unlock(rank_, counter_win_));
    if ((flags >> (async_parts::kStopShift - async_parts::kCheckpointShift)) != 0) v[1] = 1;
    if ((flags & 0xff) != 0) v[2] = 1;
  }
  if (server_state_) {
    v[1] = std::max(v[1], server_state_->stop_seen ? 1.0 : 0.0);
    v[2] = std::max(v[2], server_state_->checkpoint_seen ? 1.0 : 0.0);
  }
  {
    // Named if it hangs: where this rank's training got to, not where the segment began.
    const int64_t reached = worker_ ? worker_->taken_end : server_state_->newest;
    WatchdogScope w(ctx_.watchdog, "end of an asynchronous segment", std::max(begin, reached));
    ctx_.comm.allreduce_max(v, 4);
    broadcast_slices();
    average_model_state();
  }
  SegmentEnd e;
  e.cursor = static_cast<int64_t>(v[0]);
  e.stop = v[1] > 0;
  e.checkpoint = v[2] > 0;
  e.diverged = v[3] > 0;
  return e;
}

void AsyncSgd::broadcast_slices() {
  Backend& b = ctx_.backend;
  auto share = [&](float* data, ParamRange r, int root) {
    const size_t bytes = r.count * sizeof(float);
    if (b.host_accessible()) {  // in place
      ctx_.comm.broadcast(data + r.offset, bytes, root);
      return;
    }
    stage_.resize(std::max(stage_.size(), r.count));  // grows once
    if (rank_ == root) b.copy_to_host(stage_.data(), data + r.offset, bytes);
    ctx_.comm.broadcast(stage_.data(), bytes, root);
    if (rank_ != root) b.copy_to_device(data + r.offset, stage_.data(), bytes);
  };
  const AsyncLayout& l = ctx_.layout;
  const std::vector<OptimizerSlot> slots = ctx_.optimizer.state();
  for (int s = 0; s < l.servers; ++s) {
    share(ctx_.model.mutable_params(), l.slices[s], l.server_rank(s));
    for (const OptimizerSlot& slot : slots) {
      if (slot.per_parameter) share(slot.data, l.slices[s], l.server_rank(s));
    }
  }
  // State that is not per parameter (Adam's step count): the first server's.
  for (const OptimizerSlot& slot : slots) {
    if (!slot.per_parameter) share(slot.data, {0, slot.size}, l.server_rank(0));
  }
}

void AsyncSgd::average_model_state() {
  const size_t n = ctx_.model.state_count();
  if (n == 0) return;
  std::vector<float> host(n, 0.0f);
  if (worker_) ctx_.backend.copy_to_host(host.data(), ctx_.model.state(), n * sizeof(float));
  ctx_.comm.allreduce_sum(host.data(), n, AllreduceAlgorithm::kMpi);
  const float inv = 1.0f / static_cast<float>(ctx_.layout.workers);
  for (float& x : host) x *= inv;
  ctx_.backend.copy_to_device(ctx_.model.state(), host.data(), n * sizeof(float));
}

std::vector<int64_t> AsyncSgd::take_staleness() {
  const size_t bins = async_parts::staleness_bins(ctx_.config.distributed.max_staleness);
  std::vector<double> sums(bins, 0.0);
  if (server_state_) {
    for (size_t i = 0; i < bins; ++i) sums[i] = static_cast<double>(server_state_->histogram[i]);
    std::fill(server_state_->histogram.begin(), server_state_->histogram.end(), 0);
  }
  ctx_.comm.allreduce_sum(sums.data(), static_cast<int>(bins));
  return std::vector<int64_t>(sums.begin(), sums.end());
}

ServerStats AsyncSgd::take_server_stats() {
  if (!server_state_) return {};
  const ServerStats s = server_state_->stats;
  server_state_->stats = {};
  return s;
}

}  // namespace hpctrain
