// What a data file tells the model builder (nn/presets.hpp): its class count, its token
// vocabulary, and whether every step has a label (language modelling).
#pragma once

#include "data/dataset_file.hpp"
#include "nn/presets.hpp"

namespace hpctrain {

inline ModelData model_data(const DatasetShape& s) {
  ModelData d;
  d.num_classes = s.num_classes;
  d.vocab_size = s.tokens() ? s.vocab_size : 0;
  d.per_step = s.labels_per_sample > 1 ? s.labels_per_sample : 0;
  return d;
}

}  // namespace hpctrain
