// Loader: shard cache plus gather-and-convert on the reader threads.
#include "data/loader.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "core/error.hpp"
#include "core/random.hpp"
#include "h5/h5.hpp"

namespace hpctrain {

Loader::Loader(const DataSource& file, Shard shard, const LoaderOptions& options)
    : file_(file),
      shape_(file.shape()),
      out_shape_(file.shape()),
      raw_(options.raw),
      preprocess_(options.preprocess),
      seed_(options.seed),
      rank_(options.rank),
      streaming_(static_cast<int64_t>(shard.count * shape_.row_bytes()) > options.cache_bytes),
      shard_(shard),
      sampler_(shard.count, options.batch,
               options.batches_per_epoch > 0 ? options.batches_per_epoch
                                             : (shard.count + options.batch - 1) / options.batch,
               options.shuffle, options.seed, options.rank) {
  if (preprocess_.active()) {
    HT_REQUIRE(!shape_.tokens(), "preprocessing applies to images only");
    HT_REQUIRE(
        preprocess_.mean.empty() || (preprocess_.mean.size() == static_cast<size_t>(shape_.c) &&
                                     preprocess_.inv_std.size() == preprocess_.mean.size()),
        "normalisation needs one mean and std per channel");
    if (!raw_) out_shape_.type = SampleType::kF32;
  }
  if (streaming_ && !h5_threadsafe()) {
    throw UsageError(file.path() + ": its " + std::to_string(shard.count) +
                     " rows exceed data.cache_mb, and this HDF5 library cannot read them per "
                     "batch on the reader threads (it is not thread-safe): raise data.cache_mb");
  }
  if (!streaming_) {
    images_.resize(static_cast<size_t>(shard_.count) * shape_.sample_bytes());
    labels_.resize(static_cast<size_t>(shard_.count * shape_.labels_per_sample));
    if (shard_.count > 0) {
      file.read_rows(shard_.begin, shard_.count, images_.data(), labels_.data());
    }
  }
  // On request, a worker asks for the batches it is dealt, and again for those it gave back
  // when a segment ended early (a checkpoint by time): its slots have no fixed count.
  const int64_t end_seq = options.on_request ? std::numeric_limits<int64_t>::max()
                                             : sampler_.batches_per_epoch() * options.epochs;
  PrefetchQueue::FillFn fill_fn = [this](int64_t seq, BatchBuffer& b) { fill(seq, b); };
  if (options.on_request) {
    // kDropRead requests read and as many live (a consumer asks a few batches ahead).
    requests_.reserve(2 * kDropRead);
    fill_fn = [this](int64_t k, BatchBuffer& b) {
      const int64_t seq = requested(k);
      b.size = 0;
      if (seq >= 0) fill(seq, b);
    };
  }
  queue_ = std::make_unique<PrefetchQueue>(
      options.threads, options.depth, static_cast<size_t>(shape_.sample_elems()),
      static_cast<size_t>(shape_.labels_per_sample), options.batch,
      options.on_request ? 0 : options.first_seq, end_seq, std::move(fill_fn), options.hooks);
}

Loader::~Loader() {
  // Readers waiting for a request return before the queue joins them.
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    closing_ = true;
  }
  request_cv_.notify_all();
}

const BatchBuffer& Loader::next() {
  const BatchBuffer& batch = queue_->pop();
  ++popped_;
  return batch;
}

void Loader::request(int64_t seq) {
  HT_REQUIRE(seq >= 0, "batch requests are >= 0");
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    // A popped slot was filled, so its reader has read its request: drop those in batches
    // of kDropRead, in place (the few live requests move to the front; no allocation
    // within the room the constructor reserved).
    const int64_t read = popped_ - first_request_;
    if (read >= kDropRead) {
      requests_.erase(requests_.begin(), requests_.begin() + read);
      first_request_ = popped_;
    }
    requests_.push_back(seq);
  }
  request_cv_.notify_all();
}

int64_t Loader::requested(int64_t k) {
  std::unique_lock<std::mutex> lock(request_mutex_);
  request_cv_.wait(lock, [&] {
    return closing_ || first_request_ + static_cast<int64_t>(requests_.size()) > k;
  });
  return closing_ ? -1 : requests_[static_cast<size_t>(k - first_request_)];
}

std::shared_ptr<const std::vector<int64_t>> Loader::order_for(int64_t epoch) {
  std::lock_guard<std::mutex> lock(order_mutex_);
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  // Orders are pure functions of the epoch: an evicted one is simply recomputed.
  // Readers are at most `depth` batches apart, so keep the two newest epochs.
  while (orders_.size() >= 2) orders_.erase(orders_.begin());
  auto order = std::make_shared<std::vector<int64_t>>();
  sampler_.epoch_order(epoch, *order);
  orders_.emplace(epoch, order);
  return order;
}

namespace {

// out(y, x) = in(y + dy, x') with x' = x + dx, mirrored: w - 1 - (x + dx); zero outside the
// image; for each of c planes of h x w values of type T, through a copy of the plane. A
// pure move of stored values: the same on the stored bytes as on their decoded floats.
template <typename T>
void shift_mirror(T* x, int64_t c, int64_t h, int64_t w, bool mirror, int64_t dy, int64_t dx) {
  const int64_t plane = h * w;
  thread_local std::vector<T> in;
  in.resize(static_cast<size_t>(plane));
  for (int64_t ch = 0; ch < c; ++ch) {
    T* out = x + ch * plane;
    std::copy_n(out, plane, in.begin());
    for (int64_t y = 0; y < h; ++y) {
      const int64_t sy = y + dy;
      for (int64_t xx = 0; xx < w; ++xx) {
        const int64_t shifted = xx + dx;
        const int64_t sx = mirror ? w - 1 - shifted : shifted;
        out[y * w + xx] =
            sy >= 0 && sy < h && sx >= 0 && sx < w ? in[static_cast<size_t>(sy * w + sx)] : T{};
      }
    }
  }
}

}  // namespace

void Loader::place(const uint8_t* src, int64_t seq, int64_t i, BatchBuffer& buffer) const {
  const size_t elems = static_cast<size_t>(shape_.sample_elems());
  if (raw_) {
    auto* dst = reinterpret_cast<uint8_t*>(buffer.images.data()) +
                static_cast<size_t>(i) * shape_.sample_bytes();
    std::memcpy(dst, src, shape_.sample_bytes());
    if (preprocess_.augments()) augment(dst, sample_type_size(shape_.type), seq, i);
    return;  // normalisation is the backend's, as it decodes (leaves_normalization)
  }
  float* dst = buffer.images.data() + static_cast<size_t>(i) * elems;
  decode_samples(src, shape_.type, elems, dst);
  if (preprocess_.augments()) augment(dst, sizeof(float), seq, i);
  preprocess_.normalize(dst, shape_.h * shape_.w);
}

void Loader::augment(void* x, size_t elem_size, int64_t seq, int64_t i) const {
  // Three draws per sample: mirror, shift down, shift right.
  const uint64_t stream = mix_seed(seed_, static_cast<uint64_t>(rank_), static_cast<uint64_t>(seq));
  const uint64_t k = static_cast<uint64_t>(i) * 3;
  const bool mirror = preprocess_.flip && counter_uniform(stream, k) < 0.5f;
  const int64_t p = preprocess_.crop_padding, span = 2 * p + 1;
  const auto shift = [&](uint64_t d) {
    return std::min<int64_t>(static_cast<int64_t>(counter_uniform(stream, d) * span), span - 1) - p;
  };
  const int64_t dy = p > 0 ? shift(k + 1) : 0, dx = p > 0 ? shift(k + 2) : 0;
  if (!mirror && dy == 0 && dx == 0) return;
  const int64_t c = shape_.c, h = shape_.h, w = shape_.w;
  switch (elem_size) {
    case 1:
      shift_mirror(static_cast<uint8_t*>(x), c, h, w, mirror, dy, dx);
      break;
    case 2:
      shift_mirror(static_cast<uint16_t*>(x), c, h, w, mirror, dy, dx);
      break;
    default:
      shift_mirror(static_cast<float*>(x), c, h, w, mirror, dy, dx);
      break;
  }
}

void Loader::read_batch(const std::vector<int64_t>& order, int64_t seq, int64_t first, int64_t rows,
                        BatchBuffer& buffer) {
  // Sorted file rows with their places in the batch, read run by run. The vectors only
  // grow, once per reader thread.
  thread_local std::vector<std::pair<int64_t, int64_t>> wanted;
  thread_local std::vector<int64_t> file_rows;
  thread_local std::vector<uint8_t> bytes;
  thread_local std::vector<int32_t> labels;
  wanted.resize(static_cast<size_t>(rows));
  file_rows.resize(static_cast<size_t>(rows));
  bytes.resize(static_cast<size_t>(rows) * shape_.sample_bytes());
  const size_t per_sample = static_cast<size_t>(shape_.labels_per_sample);
  labels.resize(static_cast<size_t>(rows) * per_sample);
  for (int64_t i = 0; i < rows; ++i) {
    wanted[static_cast<size_t>(i)] = {shard_.begin + order[static_cast<size_t>(first + i)], i};
  }
  std::sort(wanted.begin(), wanted.end());
  for (int64_t k = 0; k < rows; ++k)
    file_rows[static_cast<size_t>(k)] = wanted[static_cast<size_t>(k)].first;
  file_.read_row_set(file_rows.data(), rows, bytes.data(), labels.data());
  for (int64_t k = 0; k < rows; ++k) {
    const int64_t i = wanted[static_cast<size_t>(k)].second;
    place(bytes.data() + static_cast<size_t>(k) * shape_.sample_bytes(), seq, i, buffer);
    std::copy_n(labels.data() + static_cast<size_t>(k) * per_sample, per_sample,
                buffer.labels.data() + static_cast<size_t>(i) * per_sample);
  }
}

void Loader::fill(int64_t seq, BatchBuffer& buffer) {
  const int64_t per_epoch = sampler_.batches_per_epoch();
  const int64_t epoch = seq / per_epoch, step = seq % per_epoch;
  const std::shared_ptr<const std::vector<int64_t>> order_ptr = order_for(epoch);
  const std::vector<int64_t>& order = *order_ptr;
  const int64_t rows = sampler_.batch_size(step);
  buffer.size = rows;
  if (streaming_) {
    read_batch(order, seq, step * sampler_.batch(), rows, buffer);
    return;
  }
  const size_t per_sample = static_cast<size_t>(shape_.labels_per_sample);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = order[static_cast<size_t>(step * sampler_.batch() + i)];
    place(images_.data() + static_cast<size_t>(row) * shape_.sample_bytes(), seq, i, buffer);
    std::copy_n(labels_.data() + static_cast<size_t>(row) * per_sample, per_sample,
                buffer.labels.data() + static_cast<size_t>(i) * per_sample);
  }
}

}  // namespace hpctrain
