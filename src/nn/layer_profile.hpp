// Where a training step's time goes, layer by layer (`hpctrain inspect CONFIG --time`):
// the model trains on random input, first at full speed for the step time, then with the
// backend synchronised around every layer's forward and backward, and around each part of
// a composite layer (a ResNet block's convolutions and batch normalisations), for
// per-layer and per-part times.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/model.hpp"

namespace hpctrain {

struct LayerTimes {
  int64_t batch = 0;
  double step_s = 0;                          // median forward + loss + backward, unsynchronised
  std::vector<double> forward_s, backward_s;  // per layer, medians
  // Per layer, per part (sublayers()) of a composite layer, medians; empty for others.
  std::vector<std::vector<double>> part_forward_s, part_backward_s;
};

// `warmup` steps (cuDNN's algorithm choice, caches), then `reps` timed steps each way, then
// one step between Backend::profiler_start and profiler_stop.
LayerTimes time_layers(Model& model, int64_t batch, int num_classes, int warmup, int reps);

}  // namespace hpctrain
