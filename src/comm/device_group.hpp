// Device collectives (NCCL) for the ranks of a communicator: whether they can be set up,
// and setting them up. NCCL refuses two ranks of one communicator on the same GPU (ranks
// may share one for testing), so every rank's host and device id are compared first.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "comm/communicator.hpp"

namespace hpctrain {

// True when two ranks of `comm` name the same device_id on the same host. Collective.
bool ranks_share_a_device(Communicator& comm, const std::string& device_id);

// How many ranks of `comm`, this one included, name device_id on this host: the ranks
// that share this rank's GPU and its memory. Collective.
int ranks_on_my_device(Communicator& comm, const std::string& device_id);

// The device ids that the ranks of `comm` on this host name, each once, in rank order
// (none empty: a CPU rank names none). Collective.
std::vector<std::string> devices_on_my_node(Communicator& comm, const std::string& device_id);

// Rank 0 makes the group's id, every rank receives it over MPI and joins. Collective.
void join_device_collectives(Communicator& comm, Backend& backend);

}  // namespace hpctrain
