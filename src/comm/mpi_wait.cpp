// wait_yielding: MPI_Test, then sched_yield, until the request completes.
#include "comm/mpi_wait.hpp"

#include <sched.h>

#include "comm/mpi_check.hpp"

namespace hpctrain {

void wait_yielding(MPI_Request& request) {
  for (;;) {
    int done = 0;
    HT_CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    sched_yield();  // returns at once when no other process wants this core
  }
}

}  // namespace hpctrain
