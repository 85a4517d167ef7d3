#include "comm/device_group.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "core/host.hpp"

namespace hpctrain {

namespace {

// This rank's device as every rank names it: host and device id.
std::string device_key(const std::string& device_id) { return host_name() + "/" + device_id; }

}  // namespace

bool ranks_share_a_device(Communicator& comm, const std::string& device_id) {
  std::vector<std::string> ids = comm.allgather(device_key(device_id));
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) != ids.end();
}

int ranks_on_my_device(Communicator& comm, const std::string& device_id) {
  const std::string mine = device_key(device_id);
  const std::vector<std::string> ids = comm.allgather(mine);
  return static_cast<int>(std::count(ids.begin(), ids.end(), mine));
}

std::vector<std::string> devices_on_my_node(Communicator& comm, const std::string& device_id) {
  const std::string host = device_key("");  // "host/"
  std::vector<std::string> mine;
  for (const std::string& key : comm.allgather(device_key(device_id))) {
    if (key.size() <= host.size() || key.compare(0, host.size(), host) != 0) continue;
    std::string id = key.substr(host.size());
    if (std::find(mine.begin(), mine.end(), id) == mine.end()) mine.push_back(std::move(id));
  }
  return mine;
}

void join_device_collectives(Communicator& comm, Backend& backend) {
  std::vector<std::byte> id =
      comm.rank() == 0 ? backend.new_collective_id() : std::vector<std::byte>(kCollectiveIdBytes);
  HT_REQUIRE(id.size() == kCollectiveIdBytes, "collective id of unexpected size");
  comm.broadcast(id.data(), id.size(), 0);
  backend.join_collectives(id, comm.rank(), comm.size());
}

}  // namespace hpctrain
