// Collective agreement on local failures during set-up. Set-up work that may fail
// on some ranks only (a missing file on one node, a bad value) runs locally on
// every rank; then all ranks learn whether any failed, the lowest failing rank
// prints its one-line message, and every rank leaves with the same exit code,
// so a bad config ends the job cleanly with exit 2 instead of an abort.
#pragma once

#include <mpi.h>

#include <functional>

namespace hpctrain {

// Runs `local_work` (which must make no collective calls), then agrees across
// `comm`. Returns 0 if every rank succeeded, else the largest exit code raised.
int run_and_agree(MPI_Comm comm, const std::function<void()>& local_work);

}  // namespace hpctrain
