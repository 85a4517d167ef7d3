// `hpctrain bench allreduce`: bus bandwidth of the ring all-reduce against
// MPI_Allreduce over a range of message sizes (nccl-tests' definitions).
#pragma once

#include <string>
#include <vector>

namespace hpctrain {

// Entry point of `hpctrain bench ...`; starts MPI itself.
int cmd_bench(int* argc, char*** argv, const std::vector<std::string>& args);

}  // namespace hpctrain
