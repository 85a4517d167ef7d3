// Small file-system helpers: directories and crash-safe whole-file writes.
#pragma once

#include <string>
#include <system_error>
#include <vector>

#include "core/error.hpp"

namespace hpctrain {

// Creates `dir` and its parents, each new directory synced into its parent (a file
// committed into `dir` then survives a power loss with its path). The first form returns
// false with `ec` set when a directory cannot be created, and throws Error when a sync
// fails; the second throws Error naming the path for both.
bool make_directories(const std::string& dir, std::error_code& ec);
void make_directories(const std::string& dir);

// Whether the file at `path` starts with the HDF5 signature (at offset 0, where hpctrain's
// data files and checkpoints have it); false for one that cannot be read, and for anything
// but a regular file (a FIFO is not opened).
bool is_hdf5_file(const std::string& path);

// Flushes a file's data (or a directory's entries) to disk; throws Error on failure.
void fsync_file(const std::string& path);
void fsync_directory(const std::string& dir);

// What commit_file throws when only the directory's fsync failed: the file is complete
// and in place under its final name, but the rename may not survive a power loss.
class DirectorySyncError : public Error {
 public:
  using Error::Error;
};

// Commits a finished temporary file under its final name: fsync the file, rename
// it, fsync the directory (rename alone is atomic but not durable). The temporary file is
// removed when the fsync or the rename fails; a failed directory fsync after the rename
// throws DirectorySyncError.
void commit_file(const std::string& temp_path, const std::string& path);

// A writer's temporary file (OUT.tmp), held by this process from its creation to its
// commit through an flock on it: another process that claims the same temporary (a second
// conversion to OUT, on this node or another one sharing the file system) is refused while
// this one holds it, instead of removing it from under this writer. One left by a killed
// writer is taken over, emptied. The commit renames it over OUT only while its path still
// names the file this process claimed (where the file system has no flock, that check
// alone stands: a writer whose temporary was replaced fails, never renames another's file).
class ClaimedTemporary {
 public:
  // Claims `temp_path`, created empty (a link there is removed, never written through).
  // Throws UsageError naming `output` when another process holds it or it is a directory,
  // Error (OUTPUT: cannot write: cannot create TEMP: why) when it cannot be created.
  ClaimedTemporary(std::string temp_path, const std::string& output);
  ~ClaimedTemporary();  // removes the file unless committed (or removed), and lets it go
  ClaimedTemporary(ClaimedTemporary&& other) noexcept;
  ClaimedTemporary& operator=(ClaimedTemporary&&) = delete;
  ClaimedTemporary(const ClaimedTemporary&) = delete;
  ClaimedTemporary& operator=(const ClaimedTemporary&) = delete;

  const std::string& path() const { return path_; }

  // commit_file(path(), output) once the path is checked to still name the claimed file;
  // throws Error (the output untouched) where another process replaced it.
  void commit(const std::string& output);

  // Removes the file if its path still names the claimed one, and lets it go. Never throws.
  void remove() noexcept;

 private:
  bool still_claimed() const;

  std::string path_;
  int fd_ = -1;
};

// Writes `content` to `path` through a temporary file, fsync and rename, so a
// crash leaves either the old or the new file, never half of one.
void write_file_atomic(const std::string& path, const std::string& content);

// Removes a temporary path left by an earlier writer before it is created again
// exclusively: the link itself if it is a symbolic link (never what it points to);
// nothing if it does not exist. Throws Error if it cannot.
void remove_temporary(const std::string& path);

// Removes what a writer killed during write_file_atomic(path) left: every PATH.tmp.<pid>
// but this process's own (a link itself, never what it points to). Call it only where no
// other process writes `path` (a run's lock held). Throws Error if one cannot be removed.
void remove_stale_temporaries(const std::string& path);

// Removes the files at `paths` that exist (a link itself, never what it points to), before
// a set of files that belong together is renamed over them: the set is then never half
// new and half old. Throws Error naming one it cannot remove.
void remove_files(const std::vector<std::string>& paths);

}  // namespace hpctrain
