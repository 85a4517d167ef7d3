// The input pipeline of one rank for one data file: reads the rank's shard once
// (HDF5 hyperslab, stored type), then reader threads gather each batch in the
// sampler's order and convert uint8/float16 to float in [0, 1] into prefetch
// buffers, augmenting and normalising images where asked (Preprocess); or, raw, keep
// the stored bytes, augmented, for the backend to decode and normalise. Batches are
// numbered by a global sequence (epoch * batches_per_epoch + step), which is the cursor a
// checkpoint stores; or they come in the order the consumer requests them
// (LoaderOptions::on_request).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/op_params.hpp"
#include "data/dataset_file.hpp"
#include "data/prefetch_queue.hpp"
#include "data/sampler.hpp"

namespace hpctrain {

// What is done to each image: a random shift (zeros fill what moves in) and a left-right
// mirror on the reader threads (pure moves: on the stored values or on their floats), then
// (x - mean) / std per channel of the floats (on the reader threads, or as the backend
// decodes raw batches).
// The random draws are a pure function of (seed, rank, batch sequence number, sample in
// the batch), so a resumed run makes the same ones.
struct Preprocess {
  std::vector<float> mean, inv_std;  // one per channel; empty: no normalisation
  bool flip = false;
  int crop_padding = 0;  // the largest shift in pixels, each direction
  bool augments() const { return flip || crop_padding > 0; }
  bool active() const { return !mean.empty() || augments(); }
  // (x - mean) / std per channel of one decoded image of mean.size() planes in place.
  void normalize(float* x, int64_t plane) const {
    if (mean.empty()) return;
    const auto p = static_cast<size_t>(plane);
    normalize_planes(x, mean.size() * p,
                     InputNorm{mean.data(), inv_std.data(), static_cast<int>(mean.size()), p});
  }
};

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
  // BatchBuffer::images) for the backend to decode, not floats; augmented where asked, and
  // left to the backend to normalise (leaves_normalization).
  bool raw = false;
  Preprocess preprocess;  // images only
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
  const BatchBuffer& next();
  // on_request: batch `seq` (epoch * batches_per_epoch + step) is the next one after those
  // requested before; the readers start on it at once.
  void request(int64_t seq);
  int64_t batches_per_epoch() const { return sampler_.batches_per_epoch(); }
  // The batches' samples: the file's, but float32 when preprocessed.
  const DatasetShape& shape() const { return out_shape_; }
  // Raw batches of a normalised data set: the backend normalises them as it decodes
  // (Backend::decode_input with LoaderOptions::preprocess's mean and inv_std).
  bool leaves_normalization() const { return raw_ && !preprocess_.mean.empty(); }
  double wait_seconds() const { return queue_->wait_seconds(); }

 private:
  void fill(int64_t seq, BatchBuffer& buffer);
  // Streaming: reads the batch's (number `seq`) `rows` shard rows order[first...] from the
  // file into `buffer`, in that order.
  void read_batch(const std::vector<int64_t>& order, int64_t seq, int64_t first, int64_t rows,
                  BatchBuffer& buffer);
  // One sample's stored bytes into slot i of `buffer`: decoded, augmented and normalised,
  // or raw: augmented only (with the draws of batch `seq`).
  void place(const uint8_t* src, int64_t seq, int64_t i, BatchBuffer& buffer) const;
  // Shifts and mirrors the image at `x` (values of elem_size bytes) in place: sample i of
  // batch seq's draws.
  void augment(void* x, size_t elem_size, int64_t seq, int64_t i) const;
  // The sample order of `epoch`. Shared so that a reader keeps its order alive
  // while the cache moves on to later epochs.
  std::shared_ptr<const std::vector<int64_t>> order_for(int64_t epoch);
  // on_request: the batch of the queue's k-th slot, once requested; -1 once closing.
  int64_t requested(int64_t k);

  const DataSource& file_;
  DatasetShape shape_;      // the file's
  DatasetShape out_shape_;  // the batches'
  bool raw_;
  Preprocess preprocess_;
  uint64_t seed_;
  int rank_;
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
  // on_request: the batches of slots first_request_ ... (GUARDED_BY request_mutex_); those
  // of popped slots are dropped kDropRead at a time, so it does not grow with the run.
  static constexpr int64_t kDropRead = 64;
  std::vector<int64_t> requests_;
  int64_t first_request_ = 0;             // GUARDED_BY request_mutex_
  int64_t popped_ = 0;                    // slots popped; the consumer thread's
  bool closing_ = false;                  // GUARDED_BY request_mutex_
  std::unique_ptr<PrefetchQueue> queue_;  // last: its threads use the members above
};

}  // namespace hpctrain
