// `hpctrain bench checkpoint`: checkpoint write bandwidth against a plain
// sequential write of the same bytes to the same directory, and the time the
// training thread is blocked per asynchronous checkpoint.
#pragma once

#include <string>
#include <vector>

namespace hpctrain {

int cmd_bench_checkpoint(const std::vector<std::string>& args);

}  // namespace hpctrain
