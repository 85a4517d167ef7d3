// Communicator: thin dispatch over MPI collectives and the ring.
#include "comm/communicator.hpp"

#include <algorithm>
#include <climits>

#include "comm/mpi_check.hpp"
#include "comm/mpi_wait.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

MPI_Comm duplicate(MPI_Comm comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  HT_CHECK_MPI(MPI_Comm_dup(comm, &dup));
  HT_CHECK_MPI(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
  return dup;
}

int as_int_count(size_t count) {
  HT_REQUIRE(count <= static_cast<size_t>(INT_MAX), "message too large for one MPI call");
  return static_cast<int>(count);
}

// Calls f(offset, count) for consecutive pieces of at most `max` of `total` elements.
template <typename F>
void in_pieces(size_t total, size_t max, F&& f) {
  for (size_t offset = 0; offset < total; offset += max) {
    f(offset, static_cast<int>(std::min(max, total - offset)));
  }
}

}  // namespace

Communicator::Communicator(MPI_Comm comm, size_t ring_chunk_bytes, size_t max_message_bytes)
    : comm_(duplicate(comm)),
      max_message_bytes_(std::clamp<size_t>(max_message_bytes, sizeof(float), INT_MAX)),
      ring_(comm_, ring_chunk_bytes) {
  HT_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  HT_CHECK_MPI(MPI_Comm_size(comm_, &size_));
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (Persistent& p : persistent_) MPI_Request_free(&p.request);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Communicator::allreduce_sum(float* data, size_t count, AllreduceAlgorithm algorithm) {
  HT_REQUIRE(algorithm == AllreduceAlgorithm::kRing || algorithm == AllreduceAlgorithm::kMpi,
             "host all-reduce: the algorithm must be ring or mpi");
  comm_time_.start();
  if (algorithm == AllreduceAlgorithm::kRing) {
    ring_.run(data, count);
  } else if (size_ > 1) {
    in_pieces(count, max_message_bytes_ / sizeof(float), [&](size_t offset, int n) {
      HT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data + offset, n, MPI_FLOAT, MPI_SUM, comm_));
    });
  }
  comm_time_.stop();
}

void Communicator::allreduce_doubles(double* data, int count, MPI_Op op) {
#if MPI_VERSION >= 4
  if (count > 0 && count <= kPersistentDoubles) {
    auto it = std::find_if(persistent_.begin(), persistent_.end(),
                           [&](const Persistent& p) { return p.count == count && p.op == op; });
    if (it == persistent_.end()) {  // every rank makes it at the same call: a collective
      Persistent p{count, op, MPI_REQUEST_NULL};
      HT_CHECK_MPI(MPI_Allreduce_init(MPI_IN_PLACE, persistent_data_, count, MPI_DOUBLE, op, comm_,
                                      MPI_INFO_NULL, &p.request));
      it = persistent_.insert(persistent_.end(), p);
    }
    std::copy_n(data, count, persistent_data_);
    HT_CHECK_MPI(MPI_Start(&it->request));
    wait_yielding(it->request);
    std::copy_n(persistent_data_, count, data);
    return;
  }
#endif
  MPI_Request request;
  HT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_DOUBLE, op, comm_, &request));
  wait_yielding(request);
}

void Communicator::allreduce_sum(double* data, int count) {
  allreduce_doubles(data, count, MPI_SUM);
}

void Communicator::allreduce_max(double* data, int count) {
  allreduce_doubles(data, count, MPI_MAX);
}

void Communicator::reduce_sum(float* data, size_t count, int root) {
  comm_time_.start();
  in_pieces(count, max_message_bytes_ / sizeof(float), [&](size_t offset, int n) {
    if (rank_ == root) {
      HT_CHECK_MPI(MPI_Reduce(MPI_IN_PLACE, data + offset, n, MPI_FLOAT, MPI_SUM, root, comm_));
    } else {
      HT_CHECK_MPI(MPI_Reduce(data + offset, nullptr, n, MPI_FLOAT, MPI_SUM, root, comm_));
    }
  });
  comm_time_.stop();
}

void Communicator::broadcast(void* data, size_t bytes, int root) {
  comm_time_.start();
  in_pieces(bytes, max_message_bytes_, [&](size_t offset, int n) {
    HT_CHECK_MPI(MPI_Bcast(static_cast<char*>(data) + offset, n, MPI_BYTE, root, comm_));
  });
  comm_time_.stop();
}

void Communicator::gather(const float* send, size_t count, float* recv, int root) {
  comm_time_.start();
  HT_CHECK_MPI(MPI_Gather(send, as_int_count(count), MPI_FLOAT, recv, as_int_count(count),
                          MPI_FLOAT, root, comm_));
  comm_time_.stop();
}

void Communicator::scatter(const float* send, size_t count, float* recv, int root) {
  comm_time_.start();
  HT_CHECK_MPI(MPI_Scatter(send, as_int_count(count), MPI_FLOAT, recv, as_int_count(count),
                           MPI_FLOAT, root, comm_));
  comm_time_.stop();
}

void Communicator::allgather(const double* send, int count, double* recv) {
  HT_CHECK_MPI(MPI_Allgather(send, count, MPI_DOUBLE, recv, count, MPI_DOUBLE, comm_));
}

std::vector<std::string> Communicator::allgather(const std::string& mine) {
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
  HT_CHECK_MPI(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_));
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[static_cast<size_t>(r)] = total;
    total += lengths[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  HT_CHECK_MPI(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                              offsets.data(), MPI_CHAR, comm_));
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) {
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                             static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  }
  return out;
}

void Communicator::barrier() { HT_CHECK_MPI(MPI_Barrier(comm_)); }

}  // namespace hpctrain
