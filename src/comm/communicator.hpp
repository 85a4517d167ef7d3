// The collectives the trainer uses, over a private duplicate of an MPI
// communicator. Gradient all-reduce dispatches to the ring or MPI_Allreduce;
// communication time is accumulated for metrics. Owns the duplicate; used from
// the training thread only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "comm/ring_allreduce.hpp"
#include "config/config.hpp"
#include "core/timer.hpp"

namespace hpctrain {

class Communicator {
 public:
  // The largest message of one MPI call: an MPI count is an int.
  static constexpr size_t kMaxMessageBytes = size_t{1} << 30;

  // Broadcasts, reductions to a root and MPI all-reduces larger than `max_message_bytes`
  // go in pieces of at most that (a model of more than 2^29 floats fits no int count).
  Communicator(MPI_Comm comm, size_t ring_chunk_bytes, size_t max_message_bytes = kMaxMessageBytes);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm get() const { return comm_; }

  // In-place sum across ranks with the chosen algorithm (ring or mpi).
  void allreduce_sum(float* data, size_t count, AllreduceAlgorithm algorithm);
  // Small reductions for metrics and each step's control message (non-blocking, waited
  // for yielding the core). Up to kPersistentDoubles values go through a persistent
  // request per count and operation (MPI-4 MPI_Allreduce_init), made at its first use:
  // MPICH's MPI_Iallreduce allocates its schedule each call (7 blocks), a started
  // persistent one nothing.
  static constexpr int kPersistentDoubles = 4;
  void allreduce_sum(double* data, int count);
  void allreduce_max(double* data, int count);
  // At root: data = sum over ranks (in place); elsewhere data is unchanged.
  void reduce_sum(float* data, size_t count, int root);
  void broadcast(void* data, size_t bytes, int root);
  // Every rank receives size() * count doubles, rank r's at offset r * count.
  void allgather(const double* send, int count, double* recv);
  // Every rank receives every rank's string, in rank order (any lengths).
  std::vector<std::string> allgather(const std::string& mine);
  // root receives size() * count floats, rank r's at offset r * count (count < 2^31).
  void gather(const float* send, size_t count, float* recv, int root);
  // rank r receives the count floats at offset r * count of root's `send` (count < 2^31).
  void scatter(const float* send, size_t count, float* recv, int root);
  void barrier();

  // Seconds spent in gradient and parameter collectives since the last reset.
  double comm_seconds() const { return comm_time_.total(); }
  void reset_comm_seconds() { comm_time_.reset(); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  size_t max_message_bytes_;
  RingAllreduce ring_;
  Stopwatch comm_time_;
  struct Persistent {
    int count = 0;
    MPI_Op op = MPI_OP_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::vector<Persistent> persistent_;          // at most 2 x kPersistentDoubles
  double persistent_data_[kPersistentDoubles];  // their buffer
  void allreduce_doubles(double* data, int count, MPI_Op op);
};

}  // namespace hpctrain
