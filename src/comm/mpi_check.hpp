// The one check macro for MPI calls. MPI_COMM_WORLD is set to MPI_ERRORS_RETURN
// (mpi_env.cpp) so a failing call returns here and becomes an Error naming the
// rank and the call; main then aborts the job so no rank waits forever.
#pragma once

#include <mpi.h>

namespace hpctrain {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

}  // namespace hpctrain

#define HT_CHECK_MPI(call)                                                \
  do {                                                                    \
    const int ht_mpi_rc_ = (call);                                        \
    if (ht_mpi_rc_ != MPI_SUCCESS) {                                      \
      ::hpctrain::throw_mpi_error(ht_mpi_rc_, #call, __FILE__, __LINE__); \
    }                                                                     \
  } while (0)
