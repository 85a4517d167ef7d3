// The input pipeline of one rank for one data file: reads the rank's shard once
// (HDF5 hyperslab, stored type), then reader threads gather each batch in the
// sampler's order and convert uint8/float16 to float in [0, 1] into prefetch
// buffers. Batches are numbered by a global sequence (epoch * batches_per_epoch
// + step), which is the cursor a checkpoint stores; or they come in the order the
// consumer requests them (LoaderOptions::on_request).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "data/dataset_file.hpp"
#include "data/prefetch_queue.hpp"
#include "data/sampler.hpp"

namespace hpctrain {

struct LoaderOptions {
  int64_t batch = 64;
  int64_t batches_per_epoch = 0;  // 0: every row of the shard, last batch partial
  int epochs = 1;                 // how many passes to produce
  int64_t first_seq = 0;          // where to start (a resumed run starts later)
  bool shuffle = false;
  uint64_t seed = 0;
  int rank = 0;
  int threads = 2;
  int depth = 4;
  BufferHooks hooks;  // for the batch buffers (a device backend pins them)
  // Batches hold the stored bytes (sample_bytes() per sample, from the start of
  // BatchBuffer::images) for the backend to decode, not floats.
  bool raw = false;
  // Batches come in the order request() names them (asynchronous workers, which take the
  // epoch's batches as they go); epochs and batches_per_epoch number them, first_seq is
  // unused.
  bool on_request = false;
  // The shard is read into memory once when it takes at most this many bytes; else each
  // batch's rows are read from the file as the batch is prefetched.
  int64_t cache_bytes = int64_t{1} << 62;
};

class Loader {
 public:
  // Reads rows `shard` of `file` into memory in the calling thread, or (a shard larger
  // than options.cache_bytes) reads each batch's rows on the reader threads; `file` then
  // outlives the loader. Throws UsageError when that needs a thread-safe HDF5 library
  // and this one is not.
  Loader(const DataSource& file, Shard shard, const LoaderOptions& options);

  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Next batch in sequence (blocks until ready).
  const BatchBuffer& next() { return queue_->pop(); }
  // on_request: batch `seq` (epoch * batches_per_epoch + step) is the next one after those
  // requested before; the readers start on it at once.
  void request(int64_t seq);
  int64_t batches_per_epoch() const { return sampler_.batches_per_epoch(); }
  int64_t shard_rows() const { return shard_.count; }
  const DatasetShape& shape() const { return shape_; }
  double wait_seconds() const { return queue_->wait_seconds(); }

 private:
  void fill(int64_t seq, BatchBuffer& buffer);
  // Streaming: reads the batch's `rows` shard rows order[first...] from the file into
  // `buffer`, in that order.
  void read_batch(const std::vector<int64_t>& order, int64_t first, int64_t rows,
                  BatchBuffer& buffer);
  // One sample's stored bytes into slot i of `buffer` (decoded unless raw).
  void place(const uint8_t* src, int64_t i, BatchBuffer& buffer) const;
  // The sample order of `epoch`. Shared so that a reader keeps its order alive
  // while the cache moves on to later epochs.
  std::shared_ptr<const std::vector<int64_t>> order_for(int64_t epoch);
  // on_request: the batch of the queue's k-th slot, once requested; -1 once closing.
  int64_t requested(int64_t k);

  const DataSource& file_;
  DatasetShape shape_;
  bool raw_;
  bool streaming_;  // rows read per batch, not cached
  Shard shard_;
  Sampler sampler_;
  std::vector<uint8_t> images_;  // the shard, stored element type
  std::vector<int32_t> labels_;
  std::mutex order_mutex_;
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>>
      orders_;  // GUARDED_BY order_mutex_
  std::mutex request_mutex_;
  std::condition_variable request_cv_;
  std::vector<int64_t> requests_;         // on_request, GUARDED_BY request_mutex_
  bool closing_ = false;                  // GUARDED_BY request_mutex_
  std::unique_ptr<PrefetchQueue> queue_;  // last: its threads use the members above
};

}  // namespace hpctrain
