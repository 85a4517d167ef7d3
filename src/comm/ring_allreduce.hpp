// The project's own ring all-reduce (sum, in place) over MPI point-to-point:
// reduce-scatter then all-gather around the ring, each segment pipelined in
// chunks so the reduction of one chunk overlaps the transfer of the next.
// Holds reusable buffers; one instance per communicator, not thread-safe.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace hpctrain {

class RingAllreduce {
 public:
  // comm: used as given (the caller passes a private duplicate); chunk_bytes:
  // pipelining unit of each segment.
  RingAllreduce(MPI_Comm comm, size_t chunk_bytes);

  // data[i] = sum over ranks of data[i], for any count (also 0 and < ranks).
  void run(float* data, size_t count);

 private:
  size_t segment_begin(size_t count, int segment) const;
  // One ring step: send segment `send_seg` to the next rank and receive
  // `recv_seg` from the previous one; if `reduce`, add the received chunks into
  // data as they arrive, else receive straight into data.
  void step(float* data, size_t count, int send_seg, int recv_seg, bool reduce, int tag);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  size_t chunk_elems_;
  std::vector<float> recv_buffer_;          // one segment; grows, never shrinks
  std::vector<MPI_Request> recv_requests_;  // one per chunk
  std::vector<MPI_Request> send_requests_;
};

}  // namespace hpctrain
