// Loader: shard cache plus gather-and-convert on the reader threads.
#include "data/loader.hpp"

#include <cstring>

#include "core/error.hpp"

namespace hpctrain {

Loader::Loader(const DatasetFile& file, Shard shard, const LoaderOptions& options)
    : shape_(file.shape()),
      raw_(options.raw),
      shard_(shard),
      sampler_(shard.count, options.batch,
               options.batches_per_epoch > 0 ? options.batches_per_epoch
                                             : (shard.count + options.batch - 1) / options.batch,
               options.shuffle, options.seed, options.rank) {
  images_.resize(static_cast<size_t>(shard_.count) * shape_.sample_bytes());
  labels_.resize(static_cast<size_t>(shard_.count));
  if (shard_.count > 0) file.read_rows(shard_.begin, shard_.count, images_.data(), labels_.data());
  const int64_t end_seq = sampler_.batches_per_epoch() * options.epochs;
  PrefetchQueue::FillFn fill_fn = [this](int64_t seq, BatchBuffer& b) { fill(seq, b); };
  if (options.on_request) {
    fill_fn = [this](int64_t k, BatchBuffer& b) {
      const int64_t seq = requested(k);
      b.size = 0;
      if (seq >= 0) fill(seq, b);
    };
  }
  queue_ = std::make_unique<PrefetchQueue>(
      options.threads, options.depth, static_cast<size_t>(shape_.sample_elems()), options.batch,
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

void Loader::request(int64_t seq) {
  HT_REQUIRE(seq >= 0, "batch requests are >= 0");
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    requests_.push_back(seq);
  }
  request_cv_.notify_all();
}

int64_t Loader::requested(int64_t k) {
  std::unique_lock<std::mutex> lock(request_mutex_);
  request_cv_.wait(lock, [&] { return closing_ || static_cast<int64_t>(requests_.size()) > k; });
  return closing_ ? -1 : requests_[static_cast<size_t>(k)];
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

void Loader::fill(int64_t seq, BatchBuffer& buffer) {
  const int64_t per_epoch = sampler_.batches_per_epoch();
  const int64_t epoch = seq / per_epoch, step = seq % per_epoch;
  const std::shared_ptr<const std::vector<int64_t>> order_ptr = order_for(epoch);
  const std::vector<int64_t>& order = *order_ptr;
  const int64_t rows = sampler_.batch_size(step);
  const size_t elems = static_cast<size_t>(shape_.sample_elems());
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = order[static_cast<size_t>(step * sampler_.batch() + i)];
    const uint8_t* src = images_.data() + static_cast<size_t>(row) * shape_.sample_bytes();
    if (raw_) {
      auto* dst = reinterpret_cast<uint8_t*>(buffer.images.data()) +
                  static_cast<size_t>(i) * shape_.sample_bytes();
      std::memcpy(dst, src, shape_.sample_bytes());
    } else {
      decode_samples(src, shape_.type, elems,
                     buffer.images.data() + static_cast<size_t>(i) * elems);
    }
    buffer.labels[static_cast<size_t>(i)] = labels_[static_cast<size_t>(row)];
  }
  buffer.size = rows;
}

}  // namespace hpctrain
