// The checks of a data file's datasets as DatasetFile opens it (docs/formats.md, "Data
// files"). Each throws UsageError naming the file (`path`) and the dataset.
#pragma once

#include <string>
#include <vector>

#include "core/sample_type.hpp"
#include "h5/h5.hpp"

namespace hpctrain::dataset_checks {

// A short name for an HDF5 type in error messages ("int16", "float64", "string").
std::string describe_type(hid_t type);
// Opens `name` under the root, requiring it to be a dataset whose virtual sources and
// external raw files hold all of it.
H5Handle open_dataset(hid_t file, const std::string& path, const char* name);
std::vector<hsize_t> dataset_dims(hid_t dataset);
// The sample type of /images: uint8, IEEE binary16 or binary32.
SampleType image_type(hid_t images, const std::string& path);
// /tokens: integer ids.
void check_token_type(hid_t tokens, const std::string& path);
// Refuses extents no real data set has (a sample of more than 2^31 elements, more than 2^50
// in all), whose sizes would overflow a reader's arithmetic.
void check_extent(const std::string& path, const char* name, const std::vector<hsize_t>& dims);
// /labels: rank 1, `n` rows (as many as `samples`, /images or /tokens), integer.
void check_label_dataset(hid_t labels, const std::string& path, hsize_t n, const char* samples);

}  // namespace hpctrain::dataset_checks
