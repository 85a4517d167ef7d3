// Strategy async, a server's side: one receive posted per worker; each push is applied to
// the server's slice by its optimizer (or dropped when too stale) as it arrives, or, with
// run.deterministic, in the fixed order of the batches (batch b from worker b mod workers).
#include <algorithm>

#include "comm/mpi_check.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "train/async_parts.hpp"
#include "train/signals.hpp"

namespace hpctrain {

using async_wire::Header;
using async_wire::Kind;

AsyncSgd::Server::Server(const AsyncContext& context, int index)
    : ctx(context), index_(index), slice_(context.layout.slices[index]) {
  histogram.assign(async_parts::staleness_bins(ctx.config.distributed.max_staleness), 0);
  for (int w = 0; w < ctx.layout.workers; ++w) {
    in_.emplace_back(slice_.count);
    out_.emplace_back(slice_.count);
  }
  receives_.assign(ctx.layout.workers, MPI_REQUEST_NULL);
  sends_.assign(ctx.layout.workers, MPI_REQUEST_NULL);
}

void AsyncSgd::Server::post(int w) {
  HT_CHECK_MPI(MPI_Irecv(in_[w].data(), in_[w].capacity(), MPI_BYTE, w,
                         async_wire::kToServerTag + index_, ctx.comm.get(), &receives_[w]));
}

void AsyncSgd::Server::reply(int w, int64_t flags, bool params) {
  async_wire::wait(sends_[w]);
  Header h;
  h.flags = flags | (params ? async_wire::kParams : 0);
  if (stop_signal() != 0 && (flags & async_wire::kBye) == 0) h.flags |= async_wire::kServerStop;
  h.version = version_;
  out_[w].set_header(h);
  if (params) {
    ctx.backend.copy_to_host(out_[w].payload(), ctx.model.params() + slice_.offset,
                             slice_.count * sizeof(float));
    ++stats.pulls;
  }
  const int bytes = out_[w].bytes(params ? slice_.count : 0);
  stats.bytes += bytes;
  HT_CHECK_MPI(MPI_Isend(out_[w].data(), bytes, MPI_BYTE, w, async_wire::kToWorkerTag + index_,
                         ctx.comm.get(), &sends_[w]));
}

void AsyncSgd::Server::mark_stop() {
  // A shared lock, as the workers' (lock_all); once, at the signal: no hot path.
  const int root = ctx.layout.server_rank(0);
  const int64_t bit = async_parts::kStopBit;
  int64_t old = 0;
  HT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, root, 0, counter_win));
  HT_CHECK_MPI(MPI_Fetch_and_op(&bit, &old, MPI_INT64_T, root, 0, MPI_SUM, counter_win));
  HT_CHECK_MPI(MPI_Win_unlock(root, counter_win));
}

bool AsyncSgd::Server::apply(const Header& h, const float* grads) {
  stats.bytes += static_cast<double>(slice_.count * sizeof(float));
  const int64_t staleness = version_ - h.version;
  const int64_t limit = ctx.config.distributed.max_staleness;
  if (staleness > limit) {
    ++histogram.back();
    ++stats.dropped;
    return false;
  }
  ++histogram[static_cast<size_t>(std::min(staleness, async_parts::kStalenessCap))];
  ++stats.pushes;
  // Only this slice of the gradient arena is written, and the optimizer reads no other.
  ctx.backend.copy_to_device(ctx.model.grads() + slice_.offset, grads,
                             slice_.count * sizeof(float));
  ctx.optimizer.step(ctx.model.mutable_params(), ctx.model.grads(), ctx.lr(h.batch), nullptr);
  ++version_;
  return true;
}

bool AsyncSgd::Server::handle(int w) {
  const Header h = in_[w].header();
  bool params = (h.flags & async_wire::kWantPull) != 0;
  if ((h.flags & async_wire::kHasGrad) != 0 && !apply(h, in_[w].payload())) {
    params = h.kind != static_cast<int64_t>(Kind::kFlush);  // the worker pulls afresh
  }
  if (h.kind == static_cast<int64_t>(Kind::kFlush)) {
    reply(w, async_wire::kBye, false);
    return false;
  }
  if (params) reply(w, 0, true);
  post(w);
  return true;
}

bool AsyncSgd::Server::handle_in_order(int w) {
  const Header h = in_[w].header();
  if (h.kind == static_cast<int64_t>(Kind::kFlush)) {
    if ((h.flags & async_wire::kHasGrad) != 0) apply(h, in_[w].payload());
    reply(w, async_wire::kBye, false);
    return false;
  }
  if (ended_) {  // a batch after the stop: not trained, the worker flushes next
    reply(w, async_wire::kEnd, false);
    post(w);
    return true;
  }
  bool params = (h.flags & async_wire::kWantPull) != 0;
  if ((h.flags & async_wire::kHasGrad) != 0 && !apply(h, in_[w].payload())) params = true;
  stop_seen = stop_seen || (h.flags & async_wire::kStopSeen) != 0;
  checkpoint_seen = checkpoint_seen || (h.flags & async_wire::kCheckpointSeen) != 0;
  ended_ = stop_seen || checkpoint_seen;
  reply(w, async_wire::kTaken | (ended_ ? async_wire::kEnd : 0), params);
  post(w);
  return true;
}

void AsyncSgd::Server::serve(int64_t begin, int64_t end) {
  const int workers = ctx.layout.workers;
  version_ = 0;
  ended_ = stop_seen = checkpoint_seen = false;
  const double t0 = now_seconds(), cpu0 = process_cpu_seconds();
  for (int w = 0; w < workers; ++w) post(w);
  std::vector<char> open(static_cast<size_t>(workers), 1);
  newest = begin;
  auto await = [&](int w) {
    WatchdogScope scope(ctx.watchdog, "asynchronous training: waiting for a worker", newest);
    async_wire::wait(receives_[w]);
    newest = std::max(newest, in_[w].header().batch);
  };
  if (ctx.config.run.deterministic) {
    // Batch b comes from worker (b - begin) mod workers; then each worker's flush.
    for (int64_t b = begin; b < end && !ended_; ++b) {
      const int w = static_cast<int>((b - begin) % workers);
      await(w);
      HT_REQUIRE(in_[w].header().batch == b, "async: a deterministic batch out of order");
      const double t = now_seconds();
      open[w] = handle_in_order(w);
      stats.busy_s += now_seconds() - t;
    }
    for (int w = 0; w < workers; ++w) {
      while (open[w]) {
        await(w);
        const double t = now_seconds();
        open[w] = handle_in_order(w);
        stats.busy_s += now_seconds() - t;
      }
    }
  } else {
    int left = workers;
    async_wire::IdlePoll poll;
    // A worker messages once every min(push_every, pull_every) steps.
    const double periods =
        std::min(ctx.config.distributed.push_every, ctx.config.distributed.pull_every);
    WatchdogScope scope(ctx.watchdog, "asynchronous training: waiting for workers", begin, periods);
    bool stop_marked = false;
    while (left > 0) {
      int w = MPI_UNDEFINED, arrived = 0;
      HT_CHECK_MPI(MPI_Testany(workers, receives_.data(), &w, &arrived, MPI_STATUS_IGNORE));
      if (!arrived || w == MPI_UNDEFINED) {
        if (!stop_marked && stop_signal() != 0) {
          mark_stop();
          stop_marked = true;
        }
        // A reply still on its way needs this rank's progress (MPICH moves large
        // messages between processes in chunks): poll on without sleeping until it is out.
        int sent = 0;
        HT_CHECK_MPI(MPI_Testall(workers, sends_.data(), &sent, MPI_STATUSES_IGNORE));
        if (sent) {
          poll.idle();
        } else {
          poll.reset();
        }
        continue;
      }
      poll.reset();
      newest = std::max(newest, in_[w].header().batch);
      ctx.watchdog.arm("asynchronous training: waiting for workers", newest, periods);
      const double t = now_seconds();
      if (!handle(w)) --left;
      stats.busy_s += now_seconds() - t;
    }
  }
  for (MPI_Request& r : sends_) async_wire::wait(r);
  stats.wall_s += now_seconds() - t0;
  stats.cpu_s += process_cpu_seconds() - cpu0;
}

}  // namespace hpctrain
