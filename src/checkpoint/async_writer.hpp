// Writes checkpoints on a background thread so training is blocked only while
// the state is copied. One write is in flight at a time: submitting while one is
// in flight first waits for it. After each commit, older checkpoints beyond
// `keep` are deleted (never before the newer one is committed). A written state
// is kept for recycle(), so the next snapshot reuses its memory instead of
// allocating (and page-faulting) hundreds of megabytes again.
// submit()/wait() are called from the training thread only.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "checkpoint/checkpoint_state.hpp"

namespace hpctrain {

struct CheckpointWriteStats {
  int writes = 0;
  double bytes = 0;
  double write_seconds = 0;    // background time spent writing and committing
  double blocked_seconds = 0;  // training-thread time spent in submit()/wait()
  std::string last_path;
};

class AsyncCheckpointWriter {
 public:
  AsyncCheckpointWriter(std::string dir, int keep);
  ~AsyncCheckpointWriter();  // finishes the write in flight; never throws
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Queues `state` for writing (waits for a write in flight first) and returns.
  // Rethrows the error of a failed earlier write.
  void submit(CheckpointState&& state);
  // Waits until nothing is in flight; rethrows a failed write's error.
  void wait();
  // A state whose arrays may be overwritten (the last one written), or an empty one.
  CheckpointState recycle();
  CheckpointWriteStats stats() const;

 private:
  void worker();
  void wait_idle_locked(std::unique_lock<std::mutex>& lock);

  std::string dir_;
  int keep_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<CheckpointState> pending_;  // GUARDED_BY mutex_
  std::optional<CheckpointState> spare_;    // written already, GUARDED_BY mutex_
  bool busy_ = false;                       // GUARDED_BY mutex_
  bool stopping_ = false;                   // GUARDED_BY mutex_
  std::exception_ptr error_;                // GUARDED_BY mutex_
  CheckpointWriteStats stats_;              // GUARDED_BY mutex_
  std::thread thread_;
};

}  // namespace hpctrain
