// Prefetch queue: slot state machine free -> filling -> full -> in use -> free.
#include "data/prefetch_queue.hpp"

#include "core/error.hpp"
#include "core/timer.hpp"

namespace hpctrain {

PrefetchQueue::PrefetchQueue(int threads, int depth, size_t sample_elems, size_t labels_per_sample,
                             int64_t max_batch, int64_t first_seq, int64_t end_seq, FillFn fill,
                             BufferHooks hooks)
    : fill_(std::move(fill)),
      hooks_(std::move(hooks)),
      next_to_fill_(first_seq),
      next_to_pop_(first_seq),
      end_seq_(end_seq) {
  HT_REQUIRE(threads >= 1 && depth >= 1, "prefetch needs >= 1 thread and depth >= 1");
  // depth buffers ready ahead plus the one the consumer holds.
  buffers_.resize(static_cast<size_t>(depth) + 1);
  for (auto& b : buffers_) {
    b.images.resize(sample_elems * static_cast<size_t>(max_batch));
    b.labels.resize(labels_per_sample * static_cast<size_t>(max_batch));
    if (hooks_.acquire) {
      hooks_.acquire(b.images.data(), b.images.size() * sizeof(float));
      hooks_.acquire(b.labels.data(), b.labels.size() * sizeof(int32_t));
    }
  }
  state_.assign(buffers_.size(), SlotState::kFree);
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { reader_loop(); });
}

PrefetchQueue::~PrefetchQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  slot_freed_.notify_all();
  for (auto& t : threads_) t.join();
  if (hooks_.release) {
    for (auto& b : buffers_) {
      hooks_.release(b.images.data());
      hooks_.release(b.labels.data());
    }
  }
}

void PrefetchQueue::reader_loop() {
  for (;;) {
    int slot = -1;
    int64_t seq = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        if (stopping_ || error_ || next_to_fill_ >= end_seq_) return;
        for (size_t i = 0; i < state_.size(); ++i) {
          if (state_[i] == SlotState::kFree) {
            slot = static_cast<int>(i);
            break;
          }
        }
        if (slot >= 0) break;
        slot_freed_.wait(lock);
      }
      seq = next_to_fill_++;
      state_[slot] = SlotState::kFilling;
    }
    BatchBuffer& buffer = buffers_[slot];
    try {
      fill_(seq, buffer);
      buffer.seq = seq;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_ || seq < error_seq_) {
        error_ = std::current_exception();
        error_seq_ = seq;
      }
      state_[slot] = SlotState::kFree;
      batch_filled_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      state_[slot] = SlotState::kFull;
    }
    batch_filled_.notify_all();
  }
}

const BatchBuffer& PrefetchQueue::pop() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (in_use_ >= 0) {
    state_[in_use_] = SlotState::kFree;
    in_use_ = -1;
    slot_freed_.notify_one();
  }
  HT_REQUIRE(next_to_pop_ < end_seq_, "prefetch queue read past its last batch");
  const double t0 = now_seconds();
  for (;;) {
    // Batches before a failed one are still delivered; the error surfaces when
    // the consumer reaches the batch that could not be filled.
    if (error_ && error_seq_ <= next_to_pop_) std::rethrow_exception(error_);
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (state_[i] == SlotState::kFull && buffers_[i].seq == next_to_pop_) {
        in_use_ = static_cast<int>(i);
        state_[i] = SlotState::kInUse;
        ++next_to_pop_;
        wait_seconds_ += now_seconds() - t0;
        return buffers_[i];
      }
    }
    batch_filled_.wait(lock);
  }
}

}  // namespace hpctrain
