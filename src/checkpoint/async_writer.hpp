// Writes checkpoints on a background thread. Even the copy of the live state is
// made there: submit() names the live arrays (SnapshotSource) and returns at once;
// the trainer keeps computing (forward, backward and gradient exchange only read
// the parameters) and calls wait_snapshot() before it next modifies them, so it
// is blocked only if the copy takes longer than that. One write is in flight at a
// time: submitting while one is in flight first waits for it. After each commit, older checkpoints
// beyond `keep` are deleted (never before the newer one is committed). A written state is kept for
// recycle(), so the next snapshot reuses its memory instead of allocating (and page-faulting)
// hundreds of megabytes again. submit()/wait() are called from the training thread only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_state.hpp"

namespace hpctrain {

// A live array the writer copies into state.arrays[name] before writing. Its
// owner must not modify it until wait_snapshot() has returned.
struct SnapshotSource {
  const char* name = nullptr;   // a name of static storage (checkpoint_state.hpp's constants)
  const float* data = nullptr;  // host-addressable
  size_t count = 0;
};

struct CheckpointWriteStats {
  int writes = 0;
  double bytes = 0;
  double write_seconds = 0;    // background time spent writing and committing
  double blocked_seconds = 0;  // training-thread time spent in submit()/wait()
  std::string last_path;
};

class AsyncCheckpointWriter {
 public:
  // Writes into `dir`, keeping the newest `keep` of the checkpoints `owner` (the run's
  // identity in the directory's manifest) wrote there.
  AsyncCheckpointWriter(std::string dir, int keep, std::string owner);
  ~AsyncCheckpointWriter();  // finishes the write in flight; never throws
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Queues `state` for writing (waits for a write in flight first) and returns;
  // the writer first copies `sources` into it. Rethrows the error of a failed
  // earlier write.
  void submit(CheckpointState&& state, const std::vector<SnapshotSource>& sources = {});
  // Returns once the sources of the last submit() are copied (at once if they are).
  void wait_snapshot();
  bool snapshot_pending() const { return snapshot_pending_.load(std::memory_order_acquire); }
  // Waits until nothing is in flight; rethrows a failed write's error.
  void wait();
  // Waits until nothing is in flight; a failed write's error stays for the next submit() or
  // wait().
  void wait_idle();
  // A state whose arrays may be overwritten (the last one written, or the one reserve()
  // gave), or an empty one.
  CheckpointState recycle();
  // Gives recycle() `state`, whose arrays the trainer sized at start-up, and room for
  // `sources` live arrays per submit(): no snapshot then allocates.
  void reserve(CheckpointState&& state, size_t sources);
  CheckpointWriteStats stats() const;

 private:
  void worker();
  void wait_idle_locked(std::unique_lock<std::mutex>& lock);

  std::string dir_;
  int keep_;
  std::string owner_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<CheckpointState> pending_;  // GUARDED_BY mutex_
  // Written under mutex_ while the writer is idle (submit() waits for that); the writer reads
  // it while busy_.
  std::vector<SnapshotSource> sources_;
  std::atomic<bool> snapshot_pending_{false};
  std::optional<CheckpointState> spare_;  // written already, GUARDED_BY mutex_
  bool busy_ = false;                     // GUARDED_BY mutex_
  bool stopping_ = false;                 // GUARDED_BY mutex_
  std::exception_ptr error_;              // GUARDED_BY mutex_
  CheckpointWriteStats stats_;            // GUARDED_BY mutex_
  std::thread thread_;
};

}  // namespace hpctrain
