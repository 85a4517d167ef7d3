// Background checkpoint writer: one worker thread, a one-slot queue.
#include "checkpoint/async_writer.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/checkpoint_state.hpp"
#include "checkpoint/checkpoint_store.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"

namespace hpctrain {
namespace {

constexpr int kWriterNice = 10;

}  // namespace

AsyncCheckpointWriter::AsyncCheckpointWriter(std::string dir, int keep, std::string owner)
    : dir_(std::move(dir)), keep_(keep), owner_(std::move(owner)) {
  make_directories(dir_);
  thread_ = std::thread([this] { worker(); });
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_idle_locked(lock);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AsyncCheckpointWriter::wait_idle_locked(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [this] { return !busy_ && !pending_; });
}

void AsyncCheckpointWriter::submit(CheckpointState&& state,
                                   const std::vector<SnapshotSource>& sources) {
  const double t0 = now_seconds();
  std::unique_lock<std::mutex> lock(mutex_);
  wait_idle_locked(lock);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  pending_ = std::move(state);
  sources_.assign(sources.begin(), sources.end());  // into the memory reserve() gave
  snapshot_pending_.store(!sources_.empty(), std::memory_order_release);
  stats_.blocked_seconds += now_seconds() - t0;
  lock.unlock();
  cv_.notify_all();
}

void AsyncCheckpointWriter::wait_snapshot() {
  if (!snapshot_pending_.load(std::memory_order_acquire)) return;  // the common case
  const double t0 = now_seconds();
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !snapshot_pending_.load(std::memory_order_acquire); });
  stats_.blocked_seconds += now_seconds() - t0;
}

void AsyncCheckpointWriter::wait_idle() {
  const double t0 = now_seconds();
  std::unique_lock<std::mutex> lock(mutex_);
  wait_idle_locked(lock);
  stats_.blocked_seconds += now_seconds() - t0;
}

void AsyncCheckpointWriter::wait() {
  wait_idle();
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

CheckpointState AsyncCheckpointWriter::recycle() {
  std::lock_guard<std::mutex> lock(mutex_);
  CheckpointState s = spare_ ? std::move(*spare_) : CheckpointState{};
  spare_.reset();
  return s;
}

void AsyncCheckpointWriter::reserve(CheckpointState&& state, size_t sources) {
  std::lock_guard<std::mutex> lock(mutex_);
  spare_ = std::move(state);
  sources_.reserve(sources);
}

CheckpointWriteStats AsyncCheckpointWriter::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void AsyncCheckpointWriter::worker() {
  // Background work: a lower priority keeps the woken writer from preempting the
  // training thread on a busy node (it still gets its share of the CPU).
  setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWriterNice);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || pending_.has_value(); });
    if (!pending_) return;  // stopping with nothing left to write
    CheckpointState state = std::move(*pending_);
    pending_.reset();
    busy_ = true;  // from here on submit() waits, so sources_ stays as it is
    lock.unlock();

    // 1. Snapshot the live arrays (into recycled memory), then release the trainer.
    const double t0 = now_seconds();
    for (const SnapshotSource& s : sources_) {
      std::vector<float>& dst = state.array(s.name);
      dst.resize(s.count);
      std::copy_n(s.data, s.count, dst.begin());
    }
    if (!sources_.empty()) {
      lock.lock();
      snapshot_pending_.store(false, std::memory_order_release);
      cv_.notify_all();
      lock.unlock();
    }
    // 2. Write and commit; prune older checkpoints. Parameters that are not finite (a
    // diverging run, whose loss the trainer sees only from the next step on) are not
    // committed: resuming from them could never recover.
    const std::string path = checkpoint_path(dir_, state.step);
    std::exception_ptr error;
    bool finite = true;
    for (const auto& [name, values] : state.arrays) {
      if (!name.ends_with(kParamsArray)) continue;  // the shared array or a rank's
      finite = finite &&
               std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
    }
    try {
      if (finite) {
        // Recorded as this run's before the rename: no checkpoint is ever committed that
        // retention would not delete in its time. A failed record removes the temporary; a
        // write that fails after the record takes it back (one killed leaves it to the next
        // prune).
        bool recorded = false;
        try {
          write_checkpoint_file(path, state, [&] {
            record_checkpoint(path, owner_);
            recorded = true;
          });
        } catch (const DirectorySyncError&) {
          throw;  // committed: the record stands
        } catch (...) {
          if (recorded) forget_checkpoint(path);
          throw;
        }
        prune_checkpoints(dir_, keep_, owner_, state.step);
      } else {
        log_warn("checkpoint of step " + std::to_string(state.step) +
                 " not written: its parameters are not finite");
      }
    } catch (...) {
      error = std::current_exception();
    }
    const double seconds = now_seconds() - t0;

    lock.lock();
    busy_ = false;
    if (error) {
      error_ = error;
    } else if (finite) {
      ++stats_.writes;
      stats_.bytes += static_cast<double>(state.bytes());
      stats_.write_seconds += seconds;
      stats_.last_path = path;
    }
    spare_ = std::move(state);
    cv_.notify_all();
  }
}

}  // namespace hpctrain
