// The optimizer interface: one update of the parameter arena per step, run where the
// parameters live, and the state a checkpoint must keep (named arrays in backend memory).
// make_optimizer picks the implementation optimizer.name asks for.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace hpctrain {

// A slice [offset, offset + count) of the parameter arena.
struct ParamRange {
  size_t offset = 0;
  size_t count = 0;
};

// One array of optimizer state, in backend memory.
struct OptimizerSlot {
  const char* name;  // the checkpoint array (checkpoint/checkpoint_state.hpp)
  float* data;
  size_t size;
  // True: one value per parameter (differs between ranks under strategy average, and is
  // stored per rank then). False: the same on every rank, stored once.
  bool per_parameter;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of the parameters inside the trainable ranges. `skip` (backend memory, may be
  // null): when non-zero the step changes nothing, the state included (a loss-scaled step
  // whose gradients overflowed); it is read where the parameters live, so the step loop
  // never waits for the device.
  virtual void step(float* params, const float* grads, double lr, const float* skip) = 0;
  // The state a checkpoint keeps; a state array missing from a checkpoint restarts at zero.
  virtual std::vector<OptimizerSlot> state() = 0;
};

// Only parameters inside `trainable` are updated (frozen ones get no weight decay or
// optimizer state either).
std::unique_ptr<Optimizer> make_optimizer(Backend& backend, const OptimizerConfig& config,
                                          size_t param_count, std::vector<ParamRange> trainable);

}  // namespace hpctrain
