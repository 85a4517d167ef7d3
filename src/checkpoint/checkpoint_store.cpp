// Directory scanning and retention for checkpoints.
#include "checkpoint/checkpoint_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "checkpoint/checkpoint_file.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

// "ckpt-000000001234.h5" -> 1234; anything else -> nullopt.
std::optional<int64_t> parse_step(const std::string& filename) {
  constexpr std::string_view kPrefix = "ckpt-", kSuffix = ".h5";
  if (filename.size() <= kPrefix.size() + kSuffix.size()) return std::nullopt;
  if (filename.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  if (filename.compare(filename.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  const std::string digits =
      filename.substr(kPrefix.size(), filename.size() - kPrefix.size() - kSuffix.size());
  int64_t step = 0;
  const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (digits.empty() || err != std::errc() || end != digits.data() + digits.size()) {
    return std::nullopt;  // not digits, or more than int64 holds: not one of ours
  }
  return step;
}

// The manifest of `dir`: file name -> owner.
std::map<std::string, std::string> read_manifest(const std::string& dir) {
  std::map<std::string, std::string> owners;
  std::ifstream in(fs::path(dir) / kManifestName);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) owners[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return owners;
}

// Drops the entries of `owners` whose files are not in `dir` (deleted, or records whose
// file never came); whether any was.
bool drop_missing(const std::string& dir, std::map<std::string, std::string>& owners) {
  std::error_code ec;
  return std::erase_if(owners, [&](const auto& entry) {
           return !fs::exists(fs::path(dir) / entry.first, ec);
         }) > 0;
}

void write_manifest(const std::string& dir, const std::map<std::string, std::string>& owners) {
  std::string text;
  for (const auto& [name, who] : owners) text += name + "\t" + who + "\n";
  write_file_atomic((fs::path(dir) / kManifestName).string(), text);
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof(name), "ckpt-%012lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::vector<CheckpointEntry> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code entry_ec;  // a dangling or looping link is not a checkpoint
    if (!entry.is_regular_file(entry_ec)) continue;
    if (auto step = parse_step(entry.path().filename().string())) {
      out.push_back({*step, entry.path().string()});
    }
  }
  if (ec) throw Error(dir + ": cannot list checkpoints: " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step > b.step; });
  return out;
}

std::optional<LoadedCheckpoint> load_newest_valid(const std::string& dir) {
  // Only a UsageError (the contents are bad) is skipped: an Error (the system could not
  // read the file) or a newer format version ends the run, or the older one would be
  // resumed and retention would then delete this newer one. A file that is gone by the
  // time it is read was pruned by a run still writing the directory (eval beside training,
  // checkpoint.keep 1): the directory is listed again, for the newer ones written since.
  constexpr int kListings = 20;
  for (int listing = 1;; ++listing) {
    bool pruned = false;
    for (const CheckpointEntry& e : list_checkpoints(dir)) {
      try {
        return LoadedCheckpoint{e.path, read_checkpoint_file(e.path)};
      } catch (const NewerCheckpointError& err) {
        throw NewerCheckpointError(std::string(err.what()) +
                                   ": not skipped for an older checkpoint, whose run would "
                                   "delete it; use the hpctrain that wrote it");
      } catch (const Error& err) {
        std::error_code ec;
        if (listing < kListings && !fs::exists(fs::symlink_status(e.path, ec))) {
          pruned = true;
          break;
        }
        if (dynamic_cast<const UsageError*>(&err) == nullptr) throw;
        log_warn(std::string(err.what()) + "; skipping it for an older checkpoint");
      }
    }
    if (!pruned) return std::nullopt;
  }
}

std::vector<CheckpointEntry> owned_checkpoints(const std::string& dir, const std::string& owner) {
  const std::map<std::string, std::string> owners = read_manifest(dir);
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  for (const CheckpointEntry& e : list_checkpoints(dir)) {
    const auto it = owners.find(fs::path(e.path).filename().string());
    if (it != owners.end() && it->second == owner && !fs::is_symlink(e.path, ec)) out.push_back(e);
  }
  return out;
}

std::optional<ForeignCheckpoint> foreign_checkpoint(const std::string& dir,
                                                    const std::string& owner) {
  const std::map<std::string, std::string> owners = read_manifest(dir);
  for (const CheckpointEntry& e : list_checkpoints(dir)) {  // newest first
    const auto it = owners.find(fs::path(e.path).filename().string());
    if (it != owners.end() && it->second != owner) return ForeignCheckpoint{e, it->second};
  }
  return std::nullopt;
}

void record_checkpoint(const std::string& path, const std::string& owner) {
  const fs::path p(path);
  const std::string manifest = (p.parent_path() / kManifestName).string();
  const std::string line = p.filename().string() + "\t" + owner + "\n";
  const int fd =
      ::open(manifest.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(manifest + ": cannot open to record a checkpoint: " + std::strerror(errno));
  struct stat before {};
  int err = ::fstat(fd, &before) != 0 ? errno : 0;  // the failing call's errno
  if (err == 0) {
    const ssize_t n = ::write(fd, line.data(), line.size());
    if (n != static_cast<ssize_t>(line.size())) {
      err = n < 0 ? errno : ENOSPC;  // a short write: the disk filled
      // Half a line would join the next record's and hide both from readers.
      if (n > 0 && ::ftruncate(fd, before.st_size) != 0) err = errno;
    } else if (::fsync(fd) != 0) {
      err = errno;
    }
  }
  ::close(fd);
  if (err != 0) throw Error(manifest + ": cannot record a checkpoint: " + std::strerror(err));
}

void forget_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) return;
  forget_missing_checkpoints(fs::path(path).parent_path().string(),
                             "a record of " + path + ", which was not committed");
}

void forget_missing_checkpoints(const std::string& dir, const std::string& what) {
  try {
    std::map<std::string, std::string> owners = read_manifest(dir);
    if (drop_missing(dir, owners)) write_manifest(dir, owners);
  } catch (const Error& e) {
    log_warn(std::string(e.what()) + " (" + what + ")");
  }
}

void prune_checkpoints(const std::string& dir, int keep, const std::string& owner,
                       int64_t committed) {
  std::map<std::string, std::string> owners = read_manifest(dir);
  std::error_code ec;
  int kept = 0;
  bool removed = false;
  for (const CheckpointEntry& e : list_checkpoints(dir)) {
    const std::string name = fs::path(e.path).filename().string();
    const auto it = owners.find(name);
    if (it == owners.end() || it->second != owner || fs::is_symlink(e.path, ec)) continue;
    if (e.step > committed) {
      // It would come before the checkpoint just committed at the next --resume auto, which
      // therefore did not choose it (corrupt), or it counts steps of an earlier job (other
      // ranks or batch), or of a trajectory a --resume PATH went back from.
      log_info(e.path + ": deleted: it is numbered after the checkpoint just committed (step " +
               std::to_string(committed) +
               ") but is older (corrupt, of an earlier job counting other steps, or of steps "
               "a resume went back from)");
    } else if (kept++ < keep) {
      continue;
    }
    if (!fs::remove(e.path, ec) && ec) {
      log_warn(e.path + ": cannot delete old checkpoint: " + ec.message());
      continue;
    }
    owners.erase(it);
    removed = true;
  }
  // The manifest lists what is there: not what was deleted, nor a record whose file never
  // came (a write that failed or was killed after recording it).
  if (drop_missing(dir, owners) || removed) write_manifest(dir, owners);
  // Temporaries a killed writer left: a checkpoint's, and the manifest's (NAME.tmp.PID).
  const std::string manifest_tmp = std::string(kManifestName) + ".tmp.";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if ((name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
         name.rfind("ckpt-", 0) == 0) ||
        name.rfind(manifest_tmp, 0) == 0) {
      fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace hpctrain
