// The earlier files of an output set (split's parts, shard's shards) that a new run under the
// same prefix does not write itself: commit_together removes them with the files it
// replaces, so a set is never new files beside old ones that do not belong with them.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace hpctrain {

// The regular files PREFIX-MIDDLE.h5 (spelled from `prefix` as the outputs are) other than
// `outputs` for which belongs(MIDDLE, PATH) holds, sorted; links and folders are never listed.
// Throws UsageError naming --out-prefix if `input` is one of them (the run would remove it).
std::vector<std::string> earlier_set_files(
    const std::string& prefix, const std::vector<std::string>& outputs, const std::string& input,
    const std::string& what,
    const std::function<bool(const std::string& middle, const std::string& path)>& belongs);

}  // namespace hpctrain
