// One checkpoint as one HDF5 file: root attributes for the cursor and identity,
// one float32 dataset per array (groups from the '/' in its name), each with a
// CRC-32C attribute. Writing goes to a temporary name and is committed by
// fsync + rename + directory fsync, so a crash leaves either no file or a whole
// one. Reading verifies every checksum.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "checkpoint/checkpoint_state.hpp"
#include "core/error.hpp"

namespace hpctrain {

// Writes `state` to `path` atomically (via path + ".tmp"). `before_commit`, if given, runs
// once the temporary file is complete, just before its commit (the writer records
// the checkpoint in the manifest there); if it throws, the temporary is removed and no
// checkpoint is committed.
void write_checkpoint_file(const std::string& path, const CheckpointState& state,
                           const std::function<void()>& before_commit = {});

// A checkpoint of a format version newer than this hpctrain reads: sound, not to be skipped
// for an older one (the resumed run would then delete it).
class NewerCheckpointError : public UsageError {
 public:
  using UsageError::UsageError;
};

// Reads and verifies; throws UsageError("PATH: what is wrong") for a missing,
// truncated, corrupt or foreign file (NewerCheckpointError for a newer format),
// Error("PATH: ...: the system's reason") for one the system cannot open or read
// (permission denied, an I/O error).
CheckpointState read_checkpoint_file(const std::string& path);

// True if `path` is a regular file that ends in a checkpoint's checksum footer (damaged
// or not), or an HDF5 file whose root attribute says it is an hpctrain checkpoint.
bool is_checkpoint_file(const std::string& path);

// Prints what a checkpoint holds and whether each array's checksum matches
// (for `hpctrain inspect`). Returns false if anything failed verification.
bool inspect_checkpoint_file(const std::string& path, std::ostream& out);

}  // namespace hpctrain
