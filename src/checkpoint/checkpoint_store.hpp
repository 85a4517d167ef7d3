// The checkpoint directory: file naming (ckpt-<step>.h5, so the newest is found
// by scanning), finding the newest complete and valid checkpoint, and retention.
// A file under its final name is complete by construction (commit by rename);
// stale temporary files from a crash are ignored and removed by prune().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.hpp"

namespace hpctrain {

std::string checkpoint_path(const std::string& dir, int64_t step);

struct CheckpointEntry {
  int64_t step;
  std::string path;
};

// Complete checkpoints in `dir`, newest first (empty if `dir` does not exist).
std::vector<CheckpointEntry> list_checkpoints(const std::string& dir);

struct LoadedCheckpoint {
  std::string path;
  CheckpointState state;
};

// The newest checkpoint that reads and verifies. Corrupt ones (truncated, failing a
// checksum, foreign) are reported with a warning and skipped in favour of the previous one;
// one the system cannot open or read (permissions, an I/O error) throws Error naming it,
// one of a newer format version NewerCheckpointError.
std::optional<LoadedCheckpoint> load_newest_valid(const std::string& dir);

// Retention deletes only what it can prove it wrote: a writer records each checkpoint it
// commits in the directory's manifest, kManifestName, one line "FILE<TAB>OWNER", OWNER
// naming the run (its run directory, so a resumed run owns the files of the runs it
// continues).
inline constexpr const char* kManifestName = "hpctrain-checkpoints.txt";
void record_checkpoint(const std::string& path, const std::string& owner);
// Takes back record_checkpoint(path) when no file came of it (the write failed after the
// record): where `path` does not exist, the manifest is rewritten without the lines of files
// that are not there, so that a file copied in under that name later is not taken for this
// run's. Best effort: a manifest that cannot be rewritten is left (with a warning), to be
// tidied by the next prune.
void forget_checkpoint(const std::string& path);
// The same for every record in `dir` whose file is not there (a writer killed between its
// record and its rename), at a run's start-up while it holds the directory (a file copied in
// later under such a name is then not taken for the run's); `what` says, in a warning, what
// was being tidied where the manifest cannot be rewritten.
void forget_missing_checkpoints(const std::string& dir, const std::string& what);

// The checkpoints in `dir` the manifest lists as `owner`'s and prune_checkpoints may
// therefore delete (not through a symbolic link), newest first.
std::vector<CheckpointEntry> owned_checkpoints(const std::string& dir, const std::string& owner);

// The newest checkpoint in `dir` that the manifest lists under another owner than `owner`,
// with that owner: another run's, which a run must neither resume nor overwrite.
struct ForeignCheckpoint {
  CheckpointEntry entry;
  std::string owner;
};
std::optional<ForeignCheckpoint> foreign_checkpoint(const std::string& dir,
                                                    const std::string& owner);

// After the commit of step `committed`: of the checkpoints the manifest lists as `owner`'s,
// deletes those numbered above `committed` (older than it whatever their number: corrupt, of
// a job counting other steps, or of steps a resume went back from; they would shadow it at
// the next --resume auto), then all but the newest `keep` of the rest; never a file it does
// not list (another run's, the user's) and never through a symbolic link. The manifest loses
// the lines of files that are not there (deleted, or never committed). Then the temporary
// files interrupted writes left (ckpt-*.h5.tmp).
void prune_checkpoints(const std::string& dir, int keep, const std::string& owner,
                       int64_t committed);

}  // namespace hpctrain
