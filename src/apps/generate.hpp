// hpctrain generate: text sampled from a trained language model (a config whose data.train
// is a next-token file, docs/formats.md "Token files", and one of its checkpoints).
#pragma once

#include <string>
#include <vector>

namespace hpctrain {

// Runs `hpctrain generate` with the arguments after the command name; prints the prompt
// and the sampled continuation on stdout. Throws UsageError for bad arguments.
int cmd_generate(const std::vector<std::string>& args);

}  // namespace hpctrain
