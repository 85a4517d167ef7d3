// Parameter averaging as reduce-to-root, scale at root, broadcast from root.
#include "comm/param_average.hpp"

namespace hpctrain {

void average_parameters(Communicator& comm, float* params, size_t count) {
  if (comm.size() == 1 || count == 0) return;
  comm.reduce_sum(params, count, /*root=*/0);
  if (comm.rank() == 0) {
    const float inv = 1.0f / static_cast<float>(comm.size());
    for (size_t i = 0; i < count; ++i) params[i] *= inv;
  }
  comm.broadcast(params, count * sizeof(float), /*root=*/0);
}

}  // namespace hpctrain
