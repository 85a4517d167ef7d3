// Strategy async, a worker's side: taking batches, summing gradients, pushing them to
// every server every push_every steps, pulling fresh parameters every pull_every steps.
// Without run.deterministic only pulls wait for the servers; with it every batch is
// answered, in the servers' fixed order.
#include <algorithm>

#include "comm/mpi_check.hpp"
#include "core/error.hpp"
#include "train/async_parts.hpp"

namespace hpctrain {

using async_wire::Header;
using async_wire::Kind;

AsyncSgd::Worker::Worker(const AsyncContext& context)
    : ctx(context), deterministic_(context.config.run.deterministic) {
  const AsyncLayout& l = ctx.layout;
  const size_t n = ctx.model.param_count();
  acc_.assign(n, 0.0f);
  if (!ctx.backend.host_accessible()) grads_.assign(n, 0.0f);
  tickets_.reserve(kTicketsAhead + 1);  // next_batch() takes a ticket before it uses one
  for (int s = 0; s < l.servers; ++s) {
    out_.emplace_back(l.slices[s].count);
    in_.emplace_back(l.slices[s].count);
  }
  sends_.assign(l.servers, MPI_REQUEST_NULL);
  replies_.assign(l.servers, MPI_REQUEST_NULL);
  versions_.assign(l.servers, 0);
}

void AsyncSgd::Worker::begin(int64_t begin, int64_t end, Loader& loader) {
  loader_ = &loader;
  begin_ = begin;
  end_ = end;
  taken_end = begin;
  open_ = true;
  dealt_ = steps_ = pending_ = flags_ = 0;
  noted_stop_ = noted_checkpoint_ = false;
  tickets_.clear();
  std::fill(versions_.begin(), versions_.end(), 0);  // the servers' versions restart too
  for (int s = 0; s < ctx.layout.servers; ++s) post_reply(s);
  // One access epoch on the counter for the whole segment: a claim is one atomic and a
  // flush.
  if (!deterministic_) HT_CHECK_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, counter_win));
  // Batches ahead, so that the loader reads the next while this one trains.
  for (size_t i = 0; i < kTicketsAhead; ++i) take_ticket();
}

void AsyncSgd::Worker::take_ticket() {
  if (!open_) return;
  // The step named if it hangs: where this worker's training is, not where the segment began.
  WatchdogScope w(ctx.watchdog, "asynchronous training: taking a batch", taken_end);
  int64_t batch = -1;
  if (deterministic_) {
    batch = begin_ + ctx.comm.rank() + dealt_ * ctx.layout.workers;
    ++dealt_;
  } else {
    const int root = ctx.layout.server_rank(0);
    const int64_t one = 1;
    int64_t old = 0;
    HT_CHECK_MPI(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, root, 0, MPI_SUM, counter_win));
    HT_CHECK_MPI(MPI_Win_flush(root, counter_win));
    // Any flag bit ends the segment: the batches handed out before it are a prefix.
    if ((old >> async_parts::kCheckpointShift) == 0) {
      batch = begin_ + (old & (async_parts::kCheckpointBit - 1));
    }
  }
  if (batch < 0 || batch >= end_) {
    open_ = false;
    return;
  }
  tickets_.push_back(batch);
  loader_->request(batch);
}

std::optional<int64_t> AsyncSgd::Worker::next_batch() {
  take_ticket();
  if (tickets_.empty()) return std::nullopt;
  current_ = tickets_.front();
  tickets_.erase(tickets_.begin());
  return current_;
}

void AsyncSgd::Worker::note(int64_t bit, int64_t flag) {
  bool& noted = bit == async_parts::kStopBit ? noted_stop_ : noted_checkpoint_;
  if (noted) return;
  noted = true;
  if (deterministic_) {
    flags_ |= flag;  // the servers end the segment after this worker's next batch
    return;
  }
  const int root = ctx.layout.server_rank(0);
  int64_t old = 0;
  HT_CHECK_MPI(MPI_Fetch_and_op(&bit, &old, MPI_INT64_T, root, 0, MPI_SUM, counter_win));
  HT_CHECK_MPI(MPI_Win_flush(root, counter_win));
}

const float* AsyncSgd::Worker::host_grads() {
  if (grads_.empty()) return ctx.model.grads();
  ctx.backend.copy_to_host(grads_.data(), ctx.model.grads(), grads_.size() * sizeof(float));
  return grads_.data();
}

void AsyncSgd::Worker::post_reply(int s) {
  HT_CHECK_MPI(MPI_Irecv(in_[s].data(), in_[s].capacity(), MPI_BYTE, ctx.layout.server_rank(s),
                         async_wire::kToWorkerTag + s, ctx.comm.get(), &replies_[s]));
}

int64_t AsyncSgd::Worker::take_reply(int s) {
  const Header h = in_[s].header();
  // A server's stop signal, while this worker still takes batches (after end()'s unlock no
  // counter can be touched); left out of the answer, which servers must give alike.
  if ((h.flags & async_wire::kServerStop) != 0 && open_) {
    note(async_parts::kStopBit, async_wire::kStopSeen);
  }
  if ((h.flags & async_wire::kParams) != 0) {
    const ParamRange r = ctx.layout.slices[s];
    ctx.backend.copy_to_device(ctx.model.mutable_params() + r.offset, in_[s].payload(),
                               r.count * sizeof(float));
    versions_[s] = h.version;
  }
  return h.flags & ~async_wire::kServerStop;
}

void AsyncSgd::Worker::send(Kind kind, int64_t flags, bool push, bool with_current) {
  const float* current = with_current && push ? host_grads() : nullptr;
  for (int s = 0; s < ctx.layout.servers; ++s) {
    async_wire::wait(sends_[s]);  // the buffer of the previous message is free again
    const ParamRange r = ctx.layout.slices[s];
    Header h;
    h.kind = static_cast<int64_t>(kind);
    h.flags = flags | (push ? async_wire::kHasGrad : 0);
    h.batch = kind == Kind::kFlush ? taken_end - 1 : current_;
    h.version = versions_[s];
    h.count = pending_ + (with_current ? 1 : 0);
    out_[s].set_header(h);
    float* p = out_[s].payload();
    if (push) {
      const float* a = acc_.data() + r.offset;
      if (current == nullptr) {
        std::copy(a, a + r.count, p);
      } else if (pending_ == 0) {
        std::copy(current + r.offset, current + r.offset + r.count, p);
      } else {
        for (size_t i = 0; i < r.count; ++i) p[i] = a[i] + current[r.offset + i];
      }
    }
    HT_CHECK_MPI(MPI_Isend(out_[s].data(), out_[s].bytes(push ? r.count : 0), MPI_BYTE,
                           ctx.layout.server_rank(s), async_wire::kToServerTag + s, ctx.comm.get(),
                           &sends_[s]));
  }
}

bool AsyncSgd::Worker::batch_done() {
  WatchdogScope w(ctx.watchdog, "asynchronous training: waiting for a server", current_);
  const int servers = ctx.layout.servers;
  const DistributedConfig& d = ctx.config.distributed;
  const bool push = pending_ + 1 >= d.push_every;
  const bool pull = (steps_ + 1) % d.pull_every == 0;
  if (deterministic_) {
    // Every batch is answered: taken (or not, after a stop), with parameters if pulled.
    send(Kind::kBatch, flags_ | (pull ? async_wire::kWantPull : 0), push, /*with_current=*/true);
    int64_t answer = 0;
    for (int s = 0; s < servers; ++s) {
      async_wire::wait(replies_[s]);
      const int64_t f = take_reply(s);
      HT_REQUIRE(s == 0 || f == answer, "async servers disagree on a deterministic step");
      answer = f;
      post_reply(s);
    }
    const bool taken = (answer & async_wire::kTaken) != 0;
    if (taken) {
      taken_end = current_ + 1;
      ++steps_;
      if (push) {
        pending_ = 0;
      } else {
        const float* g = host_grads();
        for (size_t i = 0; i < acc_.size(); ++i) acc_[i] = pending_ == 0 ? g[i] : acc_[i] + g[i];
        ++pending_;
      }
    }
    if ((answer & async_wire::kEnd) != 0) give_up_tickets();
    return taken;
  }
  // Sum this batch's gradients, unless this push sends them alone: then send() copies
  // them straight into the messages (no pass over acc_).
  const bool alone = push && pending_ == 0;
  if (!alone) {
    const float* g = host_grads();
    for (size_t i = 0; i < acc_.size(); ++i) acc_[i] = pending_ == 0 ? g[i] : acc_[i] + g[i];
    ++pending_;
  }
  ++steps_;
  taken_end = current_ + 1;
  // Parameters a server sent unasked (after dropping a stale push).
  for (int s = 0; s < servers; ++s) {
    int arrived = 0;
    HT_CHECK_MPI(MPI_Test(&replies_[s], &arrived, MPI_STATUS_IGNORE));
    if (arrived) {
      take_reply(s);
      post_reply(s);
    }
  }
  if (!push && !pull) return true;
  send(Kind::kBatch, pull ? async_wire::kWantPull : 0, push, /*with_current=*/alone);
  if (push) pending_ = 0;
  if (!pull) return true;
  for (int s = 0; s < servers; ++s) {
    async_wire::wait(replies_[s]);
    take_reply(s);
    post_reply(s);
  }
  return true;
}

void AsyncSgd::Worker::give_up_tickets() {
  open_ = false;
  // Their batches are in the loader's order already: read past them.
  for (size_t i = 0; i < tickets_.size(); ++i) loader_->next();
  tickets_.clear();
}

void AsyncSgd::Worker::end() {
  WatchdogScope w(ctx.watchdog, "asynchronous training: ending a segment", taken_end);
  give_up_tickets();
  if (!deterministic_) HT_CHECK_MPI(MPI_Win_unlock_all(counter_win));
  send(Kind::kFlush, flags_, /*push=*/pending_ > 0, /*with_current=*/false);
  pending_ = 0;
  // Replies may still come before each server's goodbye.
  for (int s = 0; s < ctx.layout.servers; ++s) {
    for (;;) {
      async_wire::wait(replies_[s]);
      const int64_t f = take_reply(s);
      if ((f & async_wire::kBye) != 0) break;
      post_reply(s);
    }
    async_wire::wait(sends_[s]);
  }
}

}  // namespace hpctrain
