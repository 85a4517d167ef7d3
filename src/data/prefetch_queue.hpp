// A bounded queue of preallocated batch buffers filled by reader threads (Caffe's
// free list / full list). Buffers are allocated before the threads start; batch
// `seq` is filled by whichever thread claims it, but pop() hands batches out in
// seq order, so the consumer sees the same sequence whatever the thread timing.
// pop() may be called from one consumer thread; fill runs on the reader threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hpctrain {

struct BatchBuffer {
  std::vector<float> images;    // max_batch * sample_elems
  std::vector<int32_t> labels;  // max_batch * labels per sample
  int64_t size = 0;             // samples filled
  int64_t seq = -1;             // which batch of the sequence this is
};

// Called for each buffer's memory block once after it is allocated (acquire) and once
// before it is freed (release), e.g. to pin it for DMA; either may be empty.
struct BufferHooks {
  std::function<void(void* p, size_t bytes)> acquire;
  std::function<void(void* p)> release;
};

class PrefetchQueue {
 public:
  // fill(seq, buffer) must set buffer.size and fill the first size samples.
  using FillFn = std::function<void(int64_t seq, BatchBuffer& buffer)>;

  // Produces batches first_seq .. end_seq - 1 with `threads` readers keeping up
  // to `depth` batches ready.
  PrefetchQueue(int threads, int depth, size_t sample_elems, size_t labels_per_sample,
                int64_t max_batch, int64_t first_seq, int64_t end_seq, FillFn fill,
                BufferHooks hooks = {});
  ~PrefetchQueue();
  PrefetchQueue(const PrefetchQueue&) = delete;
  PrefetchQueue& operator=(const PrefetchQueue&) = delete;

  // The next batch in sequence; the buffer returned by the previous call goes
  // back to the free list. Blocks while it is not ready; rethrows a reader's error.
  const BatchBuffer& pop();
  // Seconds pop() spent waiting.
  double wait_seconds() const { return wait_seconds_; }

 private:
  enum class SlotState { kFree, kFilling, kFull, kInUse };
  void reader_loop();

  FillFn fill_;
  BufferHooks hooks_;
  std::vector<BatchBuffer> buffers_;
  std::mutex mutex_;
  std::condition_variable slot_freed_;    // readers wait on it (GUARDED_BY mutex_)
  std::condition_variable batch_filled_;  // the consumer waits on it
  std::vector<SlotState> state_;          // GUARDED_BY mutex_
  int64_t next_to_fill_;                  // GUARDED_BY mutex_
  int64_t next_to_pop_;                   // GUARDED_BY mutex_
  int64_t end_seq_;
  int in_use_ = -1;            // slot held by the consumer, GUARDED_BY mutex_
  bool stopping_ = false;      // GUARDED_BY mutex_
  std::exception_ptr error_;   // the first failed batch's error, GUARDED_BY mutex_
  int64_t error_seq_ = 0;      // which batch failed, GUARDED_BY mutex_
  double wait_seconds_ = 0.0;  // consumer thread only
  std::vector<std::thread> threads_;
};

}  // namespace hpctrain
