// The reader threads' image preprocessing a config asks for (data.normalize, data.mean,
// data.std, data.augment): for the training loaders, `hpctrain eval` and `hpctrain export`.
#pragma once

#include "config/config.hpp"
#include "data/dataset_files.hpp"
#include "data/loader.hpp"

namespace hpctrain {

// The normalisation and augmentation for images of `train`'s shape (normalize: auto reads
// `train`'s mean and std attributes). Throws UsageError naming the key or the file: token
// data, missing attributes, counts that do not fit the channels, a std that is not > 0.
Preprocess input_preprocess(const Config& config, const DataSource& train);

}  // namespace hpctrain
