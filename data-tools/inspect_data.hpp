// A human-readable summary of one data file, for `hpctrain inspect` and
// `hpctrain-data inspect`: shape, type, classes with a label histogram, attributes, and
// the pixel range of the first samples.
#pragma once

#include <ostream>
#include <string>

namespace hpctrain {

// Validates the file as DatasetFile does (same UsageErrors) and prints the summary.
// Reads every label once, in blocks; reads only the first few samples' pixels.
void inspect_data_file(const std::string& path, std::ostream& out);

}  // namespace hpctrain
