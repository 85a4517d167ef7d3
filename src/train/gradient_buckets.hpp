// Gradient all-reduce that overlaps the backward pass: the trainable gradient ranges
// are cut into buckets of at most `bucket_elems` floats (never across a range), and each
// bucket is handed to the backend's asynchronous device collective as soon as backward
// has written it. Backward runs from the last layer to the first, so the buckets fill
// from the end of the arena towards its start.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "nn/model.hpp"
#include "optim/optimizer.hpp"

namespace hpctrain {

class GradientBuckets final : public GradientListener {
 public:
  // Starts the collective of one bucket (Backend::allreduce_sum_async).
  using Launch = std::function<void(float* grads, size_t count)>;
  // Makes later work wait for the collectives started (Backend::wait_collectives).
  using Wait = std::function<void()>;

  // `ranges` sorted by offset, non-overlapping.
  GradientBuckets(const std::vector<ParamRange>& ranges, size_t bucket_elems, Launch launch,
                  Wait wait);

  // Per step: start(grads) before Model::backward(this), finish() after it; work issued
  // after finish() sees the summed gradients.
  void start(float* grads);
  void grads_final_from(size_t offset) override;
  void finish();

  // The buckets, last (first launched) first.
  const std::vector<ParamRange>& buckets() const { return buckets_; }

 private:
  std::vector<ParamRange> buckets_;
  Launch launch_;
  Wait wait_;
  size_t next_ = 0;  // buckets_[0, next_) are launched this step
  float* grads_ = nullptr;
};

}  // namespace hpctrain
