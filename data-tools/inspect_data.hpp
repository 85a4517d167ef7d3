// A human-readable summary of one data file, for `hpctrain inspect` and
// `hpctrain-data inspect`: shape, type, classes with a label histogram, attributes, and
// the pixel range of the first samples; for a token file, every id checked against the
// vocabulary and the first window as text.
#pragma once

#include <ostream>
#include <string>

namespace hpctrain {

// Validates the file as DatasetFile does (same UsageErrors) and prints the summary.
// Reads every label and token id once, in blocks; reads only the first few samples' pixels.
void inspect_data_file(const std::string& path, std::ostream& out);

// How long `inspect` of a file may take (--timeout) before it gives up with exit 1: HDF5 1.10
// loops forever on some damaged files, and a stalled file system blocks as long.
constexpr double kInspectSeconds = 60.0;
// The seconds of `--timeout VALUE` (>= 0; 0: no limit); throws UsageError naming the option.
double inspect_timeout(const std::string& value);
// The error line when the time ran out.
std::string inspect_timeout_message(const std::string& path, double seconds);

}  // namespace hpctrain
