// The earlier files of an output set (split's parts, shard's shards) that a new run under the
// same prefix does not write itself: they are removed with the files it replaces, so a set is
// never new files beside old ones that do not belong with them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data-tools/dataset_writer.hpp"

namespace hpctrain {

// The regular files PREFIX-MIDDLE.h5 (spelled from `prefix` as the outputs are) other than
// `outputs` for which belongs(MIDDLE, PATH) holds, sorted; links and folders are never listed.
// Throws UsageError naming --out-prefix if `input` is one of them (the run would remove it).
std::vector<std::string> earlier_set_files(
    const std::string& prefix, const std::vector<std::string>& outputs, const std::string& input,
    const std::string& what,
    const std::function<bool(const std::string& middle, const std::string& path)>& belongs);

// commit_together(writers), with the `earlier` files also removed once every writer is
// finished and before any is renamed.
void commit_replacing(const std::vector<DatasetWriter*>& writers,
                      const std::vector<std::string>& earlier);

}  // namespace hpctrain
