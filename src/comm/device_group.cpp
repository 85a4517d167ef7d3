#include "comm/device_group.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "comm/mpi_check.hpp"
#include "core/error.hpp"

namespace hpctrain {

bool ranks_share_a_device(Communicator& comm, const std::string& device_id) {
  char mine[160] = {};
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  std::snprintf(mine, sizeof(mine), "%s/%s", host, device_id.c_str());
  std::vector<char> all(sizeof(mine) * static_cast<size_t>(comm.size()));
  HT_CHECK_MPI(
      MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all.data(), sizeof(mine), MPI_CHAR, comm.get()));
  std::vector<std::string> ids;
  for (int r = 0; r < comm.size(); ++r) ids.emplace_back(all.data() + r * sizeof(mine));
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) != ids.end();
}

void join_device_collectives(Communicator& comm, Backend& backend) {
  std::vector<std::byte> id =
      comm.rank() == 0 ? backend.new_collective_id() : std::vector<std::byte>(kCollectiveIdBytes);
  HT_REQUIRE(id.size() == kCollectiveIdBytes, "collective id of unexpected size");
  comm.broadcast(id.data(), id.size(), 0);
  backend.join_collectives(id, comm.rank(), comm.size());
}

}  // namespace hpctrain
