// MPI start-up and shut-down in one place, plus the facts every rank needs about
// where it runs: world rank/size and node-local rank/size (for device binding and
// thread counts). One instance per process, owned by main.
#pragma once

#include <mpi.h>

namespace hpctrain {

class MpiEnv {
 public:
  MpiEnv(int* argc, char*** argv);
  ~MpiEnv();
  MpiEnv(const MpiEnv&) = delete;
  MpiEnv& operator=(const MpiEnv&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  // A barrier on the world that ignores errors, just before finalize(), so that the ranks
  // enter MPI_Finalize together: MPICH 4.0's UCX transport closes its connections there and
  // then waits for every rank without serving them, so over TCP a rank that enters it later
  // than another can wait for that one's acknowledgement forever.
  void wait_for_all();

  // MPI_Finalize, once (the destructor's, which waits for all first, called earlier).
  void finalize();

  // Ends every rank of the job with `code` (MPI_Abort); used when one rank fails
  // while others may be inside a collective.
  [[noreturn]] static void abort(int code);

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace hpctrain
