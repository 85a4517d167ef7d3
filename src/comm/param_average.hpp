// Rank-0 parameter averaging (the classic parameter-averaging scheme): every rank
// trains locally; every K steps rank 0 sums everyone's parameters, divides by the
// number of ranks and sends the average back. Optimizer state stays local.
#pragma once

#include <cstddef>

#include "backend/backend.hpp"
#include "comm/communicator.hpp"

namespace hpctrain {

// params: host-addressable memory of `count` floats (CPU backend).
void average_parameters(Communicator& comm, Backend& backend, float* params, size_t count);

}  // namespace hpctrain
