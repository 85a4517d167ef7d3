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

// A writer's temporary file (OUT.tmp), from its creation to its rename over OUT. What an
// earlier writer left at the path is removed first (a link itself, never what it leads to),
// and the writer then creates the file exclusively and records it with own(). The commit
// renames the path over OUT only while the path still names the file this writer created:
// a second command writing OUT meanwhile removes the first one's temporary and makes its
// own, and the first then fails instead of renaming the second's half-written file (the
// second's is complete when it is renamed). No lock is taken: HDF5 opens the file by its
// path, and may lock it itself.
class OwnedTemporary {
 public:
  // Removes what is at `temp_path` (a stale temporary). Throws UsageError naming `output`
  // where a directory is there, Error where it cannot be removed.
  OwnedTemporary(std::string temp_path, std::string output);
  ~OwnedTemporary();  // remove()
  OwnedTemporary(OwnedTemporary&& other) noexcept;
  OwnedTemporary& operator=(OwnedTemporary&&) = delete;
  OwnedTemporary(const OwnedTemporary&) = delete;
  OwnedTemporary& operator=(const OwnedTemporary&) = delete;

  const std::string& path() const { return path_; }

  // Records the file the writer created: that of `fd`, the descriptor it writes through, or
  // where it has none (fd < 0), the file at the path now. A descriptor of it is kept until
  // the commit, so that its inode number cannot pass to another writer's file meanwhile.
  void own(int fd = -1);

  // Creates the file (empty, exclusively) and owns it, for a writer that then writes it by
  // its path (what it writes is removed with it if it fails half-way).
  void create();

  // Flushes the owned file to disk (fsync), once the path is checked to still name it;
  // throws as commit() does.
  void sync();

  // commit_file(path(), OUT) once the path is checked to still name the owned file; throws
  // Error "OUT: not written: ..." (OUT untouched) where another process replaced it.
  void commit();

  // Removes the file where the path still names the owned one (never another writer's).
  // Never throws.
  void remove() noexcept;

 private:
  bool still_owned() const;
  void check_owned() const;  // throws "OUT: not written: ..." unless still_owned()

  std::string path_, output_;
  int fd_ = -1;  // the owned file's, from own() to the commit
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
