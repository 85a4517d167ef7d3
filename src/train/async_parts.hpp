// The two sides of strategy async (train/async_sgd.hpp), private to its three files:
// what a worker and a server keep between the calls of a segment.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "train/async_sgd.hpp"
#include "train/async_wire.hpp"

namespace hpctrain {

namespace async_parts {
// The ticket counter: batches handed out in the low bits; a rank that got a stop signal
// adds kStopBit, rank 0's clock kCheckpointBit, and a worker that sees either bit stops
// taking batches.
inline constexpr int kCheckpointShift = 40;
inline constexpr int kStopShift = 48;
inline constexpr int64_t kCheckpointBit = int64_t{1} << kCheckpointShift;
inline constexpr int64_t kStopBit = int64_t{1} << kStopShift;

// The staleness histogram's bins: one per staleness 0 ... min(max_staleness, kStalenessCap)
// of the pushes applied (the one at kStalenessCap counts those of that staleness or more),
// and one of those dropped. Capped so that a large distributed.max_staleness ("never drop")
// costs no memory and no summary.json entries per possible staleness.
inline constexpr int64_t kStalenessCap = 64;
inline size_t staleness_bins(int64_t max_staleness) {
  return static_cast<size_t>(std::min(max_staleness, kStalenessCap)) + 2;
}
}  // namespace async_parts

struct AsyncSgd::Worker {
  explicit Worker(const AsyncContext& context);
  void begin(int64_t begin, int64_t end, Loader& loader);
  std::optional<int64_t> next_batch();
  bool batch_done();
  // A stop signal (counter bit `bit`, deterministic flag `flag`).
  void note(int64_t bit, int64_t flag);
  void end();

  const AsyncContext& ctx;
  MPI_Win counter_win = MPI_WIN_NULL;
  int64_t taken_end = 0;  // one past the newest batch this worker trained in the segment

 private:
  void take_ticket();
  // The gradients of the current batch in host memory.
  const float* host_grads();
  // Sends a message to every server: `push` the summed gradients in acc_ (plus, with
  // `with_current`, the current batch's).
  void send(async_wire::Kind kind, int64_t flags, bool push, bool with_current);
  // Takes a server's reply: its parameters into the model. Returns its flags.
  int64_t take_reply(int s);
  void post_reply(int s);
  // Deterministic: the batches handed to this worker that it will not train.
  void give_up_tickets();

  Loader* loader_ = nullptr;
  int64_t begin_ = 0, end_ = 0;
  bool deterministic_;
  // Batches handed to this worker, requested from the loader, oldest first: kTicketsAhead
  // between batches, one more while next_batch() takes the next; in memory reserved once
  // (a deque allocated every 64 steps).
  static constexpr size_t kTicketsAhead = 2;
  std::vector<int64_t> tickets_;
  bool open_ = false;     // more batches may come
  int64_t dealt_ = 0;     // deterministic: this worker's batches handed out
  int64_t current_ = -1;  // the batch being trained
  int64_t steps_ = 0;     // batches trained in the segment
  int64_t pending_ = 0;   // batches summed in acc_, not yet pushed
  int64_t flags_ = 0;     // kStopSeen / kCheckpointSeen for the next message
  bool noted_stop_ = false, noted_checkpoint_ = false;
  std::vector<float> acc_, grads_;             // host: summed gradients; staged gradients (device)
  std::vector<async_wire::Message> out_, in_;  // per server
  std::vector<MPI_Request> sends_, replies_;   // per server
  std::vector<int64_t> versions_;              // per server: of the parameters held
};

struct AsyncSgd::Server {
  Server(const AsyncContext& context, int index);
  void serve(int64_t begin, int64_t end);

  const AsyncContext& ctx;
  std::vector<int64_t> histogram;  // staleness of pushes; the last entry: dropped
  ServerStats stats;
  bool stop_seen = false, checkpoint_seen = false;  // deterministic, this segment
  int64_t newest = 0;  // the newest batch received in the segment: where training is
  MPI_Win counter_win = MPI_WIN_NULL;  // unless deterministic: the batch counter

 private:
  // Handles worker w's message; false when it was w's flush.
  bool handle(int w);
  // Deterministic: batch message or flush of worker w, in the fixed order.
  bool handle_in_order(int w);
  // A stop signal on this rank: the counter's stop bit, so that every worker stops at the
  // next batch it takes (not only one that a reply reaches).
  void mark_stop();
  // Applies a push unless too stale; returns false when it was dropped.
  bool apply(const async_wire::Header& h, const float* grads);
  void reply(int w, int64_t flags, bool params);
  void post(int w);

  int index_;
  ParamRange slice_;
  int64_t version_ = 0;
  bool ended_ = false;                         // deterministic: a stop ended the segment
  std::vector<async_wire::Message> in_, out_;  // per worker
  std::vector<MPI_Request> receives_, sends_;  // per worker
};

}  // namespace hpctrain
