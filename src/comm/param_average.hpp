// Rank-0 parameter averaging (the classic parameter-averaging scheme): every rank
// trains locally; every K steps rank 0 sums everyone's parameters, divides by the
// number of ranks and sends the average back. Optimizer state stays local.
#pragma once

#include <cstddef>

#include "comm/communicator.hpp"

namespace hpctrain {

// params: `count` floats of host memory (a device backend stages them).
void average_parameters(Communicator& comm, float* params, size_t count);

}  // namespace hpctrain
