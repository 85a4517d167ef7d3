// Strategy async: Downpour-style asynchronous SGD with parameter servers
// (docs/architecture.md, "Asynchronous training"). The last distributed.parameter_servers
// ranks are servers, each holding a contiguous slice of the parameters (equal in bytes) and
// the optimizer state of its slice; the other ranks are workers. A worker computes the
// gradient of one batch at the parameters it last pulled, pushes the sum of its gradients
// to every server every push_every of its steps and pulls every pull_every steps, without
// waiting for the other workers. A server applies a push when it was computed from
// parameters at most max_staleness of its updates old, else drops it (counted) and sends
// the worker fresh parameters.
//
// Training runs in segments of the global batch sequence (epoch * steps_per_epoch + step):
// up to the end of the epoch or the next checkpoint by step count, or shorter when a rank
// gets a stop signal or rank 0's clock asks for a checkpoint. Within a segment workers take
// batches as they go: from a counter on the first server (MPI one-sided fetch-and-add) or,
// with run.deterministic, round-robin (batch b to worker b mod workers) with every push
// applied in that order, so a run's result depends on its config and world size only. The
// batches a segment trained are always a prefix of it, so one cursor is the whole data
// position. At a segment's end (finish_segment, collective) every rank receives the
// servers' parameters and optimizer state and the workers' averaged BatchNorm statistics:
// evaluation and checkpoints then work as under the synchronous strategies.
//
// Used from the training thread only; servers poll their requests with short sleeps when
// idle, so they leave the cores to workers.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "config/config.hpp"
#include "data/loader.hpp"
#include "nn/model.hpp"
#include "optim/optimizer.hpp"
#include "train/watchdog.hpp"

namespace hpctrain {

// Which ranks serve which part of the parameter arena.
struct AsyncLayout {
  int workers = 0, servers = 0;
  std::vector<ParamRange> slices;  // per server, contiguous, in server order

  bool is_server(int rank) const { return rank >= workers; }
  int server_rank(int server) const { return workers + server; }
  // Sets the servers' entries of a per-rank list to 0 (a server trains no batch).
  void zero_servers(std::vector<int64_t>& per_rank) const {
    std::fill(per_rank.begin() + workers, per_rank.end(), 0);
  }
};

// Throws UsageError (naming distributed.parameter_servers in `config_file`) unless
// 1 <= servers < world_size.
AsyncLayout async_layout(const std::string& config_file, int world_size, int servers,
                         size_t param_count);

// The ranges of `trainable` inside `slice`: what a server's optimizer updates.
std::vector<ParamRange> ranges_within(const std::vector<ParamRange>& trainable, ParamRange slice);

// A server's work over an epoch (summed over its segments).
struct ServerStats {
  int64_t pushes = 0, pulls = 0, dropped = 0;
  double wall_s = 0, busy_s = 0, cpu_s = 0;  // busy: handling messages; cpu: process time
  double bytes = 0;                          // received and sent, payloads
};

// How a segment ended, the same on every rank (finish_segment).
struct SegmentEnd {
  int64_t cursor = 0;       // the first batch not trained
  bool stop = false;        // a rank got a stop signal
  bool checkpoint = false;  // rank 0's clock asked for a checkpoint
  bool diverged = false;    // a worker's loss in the epoch so far is not finite
};

struct AsyncContext {
  const Config& config;
  const AsyncLayout& layout;
  Communicator& comm;
  Backend& backend;
  Model& model;
  Optimizer& optimizer;                     // a server's updates only its slice's trainable ranges
  std::function<double(int64_t batch)> lr;  // the schedule, by batch of the sequence
  Watchdog& watchdog;
};

class AsyncSgd {
 public:
  // Collective (the ticket counter's window, unless deterministic).
  explicit AsyncSgd(const AsyncContext& context);
  ~AsyncSgd();
  AsyncSgd(const AsyncSgd&) = delete;
  AsyncSgd& operator=(const AsyncSgd&) = delete;

  bool is_server() const { return server_ >= 0; }

  // Worker: starts the segment of batches [begin, end), requesting its first batches from
  // `loader` (which must deliver batches in request order).
  void begin_work(int64_t begin, int64_t end, Loader& loader);
  // Worker: the next batch to train, or nullopt when this worker's part of the segment is
  // done (the loader's next() then holds that batch).
  std::optional<int64_t> next_batch();
  // Worker: the gradients of the batch next_batch() gave are in the model's arena.
  // Pushes and pulls as due; a pull replaces the model's parameters. False when the
  // batch was not taken (run.deterministic, the segment ended before it): the batch is
  // trained again in the next segment, and its loss must not count now.
  bool batch_done();
  // Worker: this rank got a stop signal / rank 0's clock asks for a checkpoint: the
  // segment ends early for every worker.
  void note_stop();
  void note_checkpoint_due();
  // Worker: pushes what is left and waits until every server has taken it.
  void end_work();

  // Server: serves the workers until each has ended its part of [begin, end).
  void serve(int64_t begin, int64_t end);

  // Collective, after begin_work..end_work or serve: every rank gets the servers'
  // parameters and optimizer state and the workers' averaged model state. `stop`: this
  // rank got a stop signal (a server's, or a worker's after its part ended); `diverged`:
  // this worker's loss is not finite.
  SegmentEnd finish_segment(int64_t begin, bool stop, bool diverged);

  // Collective: the staleness histogram of the pushes since the last call, summed over the
  // servers (entry s: pushes s updates old; the last: dropped), then reset.
  std::vector<int64_t> take_staleness();
  // This server's totals since the last call, then reset (zeros on a worker).
  ServerStats take_server_stats();

 private:
  struct Worker;
  struct Server;
  // The parameters and optimizer state of each server's slice, to everyone.
  void broadcast_slices();
  void average_model_state();

  AsyncContext ctx_;
  int rank_, server_ = -1;
  MPI_Win counter_win_ = MPI_WIN_NULL;  // unless deterministic: on the first server
  int64_t* counter_ = nullptr;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Server> server_state_;
  std::vector<float> stage_;  // broadcast_slices' host copy where the arrays are on a device
};

}  // namespace hpctrain
