// Waiting for MPI requests without holding the core: MPI_Wait busy-polls, and on a node
// with more busy ranks than cores (a laptop, a CI machine, ranks sharing a node with their
// loader threads) the rank it waits for cannot run; 4 ranks on 2 cores then trained the
// MLP 7x slower. Used by the ring all-reduce and the per-step control collectives.
#pragma once

#include <mpi.h>

namespace hpctrain {

// Completes `request`, testing it and yielding the core (sched_yield) between tests.
void wait_yielding(MPI_Request& request);

}  // namespace hpctrain
