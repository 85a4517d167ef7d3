#include "train/gradient_buckets.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace hpctrain {

GradientBuckets::GradientBuckets(const std::vector<ParamRange>& ranges, size_t bucket_elems,
                                 Launch launch, Wait wait)
    : launch_(std::move(launch)), wait_(std::move(wait)) {
  HT_REQUIRE(bucket_elems > 0, "gradient buckets need a positive size");
  for (auto r = ranges.rbegin(); r != ranges.rend(); ++r) {
    // From the range's end backwards: full buckets first, the remainder at its start.
    size_t end = r->offset + r->count;
    while (end > r->offset) {
      const size_t begin = end - std::min(bucket_elems, end - r->offset);
      buckets_.push_back({begin, end - begin});
      end = begin;
    }
  }
}

void GradientBuckets::start(float* grads) {
  grads_ = grads;
  next_ = 0;
}

void GradientBuckets::grads_final_from(size_t offset) {
  while (next_ < buckets_.size() && buckets_[next_].offset >= offset) {
    launch_(grads_ + buckets_[next_].offset, buckets_[next_].count);
    ++next_;
  }
}

void GradientBuckets::finish() {
  grads_final_from(0);
  wait_();
}

}  // namespace hpctrain
