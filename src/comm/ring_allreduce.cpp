// Ring all-reduce. With P ranks the buffer is cut into P segments. Each rank
// sends to rank+1 and receives from rank-1:
//   reduce-scatter, step s = 0..P-2: send segment (r - s), receive segment
//     (r - s - 1) and add it to the local copy; afterwards rank r holds the full
//     sum of segment (r + 1).
//   all-gather, step s = 0..P-2: send segment (r + 1 - s), receive segment
//     (r - s) and store it.
// Each rank sends and receives 2(P-1)/P of the buffer: bandwidth-optimal.
#include "comm/ring_allreduce.hpp"

#include <algorithm>
#include <climits>

#include "comm/mpi_check.hpp"
#include "comm/mpi_wait.hpp"

namespace hpctrain {

RingAllreduce::RingAllreduce(MPI_Comm comm, size_t chunk_bytes)
    : comm_(comm), chunk_elems_(std::max<size_t>(chunk_bytes / sizeof(float), 16)) {
  HT_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  HT_CHECK_MPI(MPI_Comm_size(comm_, &size_));
  chunk_elems_ = std::min<size_t>(chunk_elems_, INT_MAX);
}

size_t RingAllreduce::segment_begin(size_t count, int segment) const {
  // Balanced split: segment sizes differ by at most one element.
  const size_t p = static_cast<size_t>(size_);
  const size_t s = static_cast<size_t>(segment);
  return count / p * s + std::min(s, count % p);
}

void RingAllreduce::step(float* data, size_t count, int send_seg, int recv_seg, bool reduce,
                         int tag) {
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ - 1 + size_) % size_;
  const size_t send_begin = segment_begin(count, send_seg);
  const size_t send_count = segment_begin(count, send_seg + 1) - send_begin;
  const size_t recv_begin = segment_begin(count, recv_seg);
  const size_t recv_count = segment_begin(count, recv_seg + 1) - recv_begin;
  const size_t send_chunks = (send_count + chunk_elems_ - 1) / chunk_elems_;
  const size_t recv_chunks = (recv_count + chunk_elems_ - 1) / chunk_elems_;
  if (recv_requests_.size() < recv_chunks) recv_requests_.resize(recv_chunks);
  if (send_requests_.size() < send_chunks) send_requests_.resize(send_chunks);
  float* recv_base = reduce ? recv_buffer_.data() : data + recv_begin;

  // 1. Post all receives, then all sends, so every chunk is in flight at once.
  for (size_t c = 0; c < recv_chunks; ++c) {
    const size_t off = c * chunk_elems_;
    const int n = static_cast<int>(std::min(chunk_elems_, recv_count - off));
    HT_CHECK_MPI(MPI_Irecv(recv_base + off, n, MPI_FLOAT, prev, tag, comm_, &recv_requests_[c]));
  }
  for (size_t c = 0; c < send_chunks; ++c) {
    const size_t off = c * chunk_elems_;
    const int n = static_cast<int>(std::min(chunk_elems_, send_count - off));
    HT_CHECK_MPI(
        MPI_Isend(data + send_begin + off, n, MPI_FLOAT, next, tag, comm_, &send_requests_[c]));
  }
  // 2. Reduce chunks in arrival order of the ring (in order: the sender posts in
  //    order and MPI does not overtake), overlapping with the remaining transfers.
  for (size_t c = 0; c < recv_chunks; ++c) {
    wait_yielding(recv_requests_[c]);
    if (reduce) {
      const size_t off = c * chunk_elems_;
      const size_t n = std::min(chunk_elems_, recv_count - off);
      float* dst = data + recv_begin + off;
      const float* src = recv_buffer_.data() + off;
      for (size_t i = 0; i < n; ++i) dst[i] += src[i];
    }
  }
  // 3. The segment sent now may be overwritten by the next step: wait for it.
  for (size_t c = 0; c < send_chunks; ++c) wait_yielding(send_requests_[c]);
}

void RingAllreduce::run(float* data, size_t count) {
  if (size_ == 1 || count == 0) return;
  const size_t max_segment = (count + size_ - 1) / size_;
  if (recv_buffer_.size() < max_segment) recv_buffer_.resize(max_segment);
  const int p = size_;
  // Tags alternate between steps: each step completes all of its messages before the next
  // starts, and MPI guarantees only tags up to 32767 (a tag per step would not do past 16384
  // ranks).
  for (int s = 0; s < p - 1; ++s) {
    step(data, count, (rank_ - s + p) % p, (rank_ - s - 1 + p) % p, /*reduce=*/true, s % 2);
  }
  for (int s = 0; s < p - 1; ++s) {
    step(data, count, (rank_ + 1 - s + p) % p, (rank_ - s + p) % p, /*reduce=*/false, 2 + s % 2);
  }
}

}  // namespace hpctrain
