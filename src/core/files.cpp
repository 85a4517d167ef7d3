// POSIX implementation of the file helpers (fsync has no std:: equivalent).
#include "core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "core/error.hpp"

namespace hpctrain {

namespace {

void fsync_open(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open to sync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) throw Error(path + ": fsync failed: " + std::strerror(saved));
}

}  // namespace

void fsync_file(const std::string& path) { fsync_open(path, O_RDONLY); }

void fsync_directory(const std::string& dir) { fsync_open(dir, O_RDONLY | O_DIRECTORY); }

bool make_directories(const std::string& dir, std::error_code& ec) {
  namespace fs = std::filesystem;
  // The components that do not exist yet, deepest first.
  std::vector<fs::path> missing;
  fs::path p = fs::absolute(dir, ec);
  if (ec) return false;
  if (p.filename().empty()) p = p.parent_path();  // a trailing slash
  for (; p.has_relative_path() && !fs::exists(p, ec); p = p.parent_path()) missing.push_back(p);
  if (ec) return false;
  fs::create_directories(dir, ec);
  if (ec) return false;
  // A new directory's entry is in its parent: durable once the parent is synced, from the
  // top down, so that a file committed into `dir` after a power loss has a path to it.
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    fsync_directory(it->parent_path().string());
  }
  return true;
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  if (!make_directories(dir, ec)) {
    throw Error(dir + ": cannot create directory: " + ec.message());
  }
}

void commit_file(const std::string& temp_path, const std::string& path) {
  // A failed fsync (where NFS and Lustre first report a full disk or quota) or rename
  // leaves no temporary file behind.
  try {
    fsync_file(temp_path);
  } catch (const Error&) {
    ::unlink(temp_path.c_str());
    throw;
  }
  if (::rename(temp_path.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path.c_str());
    throw Error(path + ": cannot rename " + temp_path + ": " + std::strerror(err));
  }
  const std::string dir = std::filesystem::absolute(path).parent_path().string();
  try {
    fsync_directory(dir);
  } catch (const Error& e) {
    throw DirectorySyncError(e.what());
  }
}

bool is_hdf5_file(const std::string& path) {
  // Opening a FIFO would wait for a writer forever.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char signature[8] = {};
  return in.read(signature, sizeof(signature)) &&
         std::memcmp(signature, "\x89HDF\r\n\x1a\n", sizeof(signature)) == 0;
}

void remove_temporary(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return;
  const int err = errno;
  struct stat st {};
  // A read-only file system answers EROFS for a path that is not there too.
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return;
  throw Error(path + ": cannot remove a stale temporary file: " + std::strerror(err));
}

OwnedTemporary::OwnedTemporary(std::string temp_path, std::string output)
    : path_(std::move(temp_path)), output_(std::move(output)) {
  struct stat st = {};
  if (::lstat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError(output_ + ": " + path_ +
                     " is a directory, where this command writes its temporary file");
  }
  remove_temporary(path_);
}

OwnedTemporary::OwnedTemporary(OwnedTemporary&& other) noexcept
    : path_(std::move(other.path_)),
      output_(std::move(other.output_)),
      fd_(std::exchange(other.fd_, -1)) {}

OwnedTemporary::~OwnedTemporary() { remove(); }

void OwnedTemporary::own(int fd) {
  const int opened = fd >= 0 ? -1 : ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  const int kept = ::fcntl(fd >= 0 ? fd : opened, F_DUPFD_CLOEXEC, 0);
  const int err = errno;
  if (opened >= 0) ::close(opened);
  if (kept < 0) throw Error(path_ + ": cannot hold what was created: " + std::strerror(err));
  if (fd_ >= 0) ::close(fd_);
  fd_ = kept;
}

void OwnedTemporary::create() {
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(output_ + ": cannot write: cannot create " + path_ + ": " + std::strerror(errno));
  }
  try {
    own(fd);
  } catch (...) {
    ::close(fd);
    ::unlink(path_.c_str());
    throw;
  }
  ::close(fd);
}

bool OwnedTemporary::still_owned() const {
  struct stat held = {};
  struct stat named = {};
  return fd_ >= 0 && ::fstat(fd_, &held) == 0 && ::lstat(path_.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

void OwnedTemporary::check_owned() const {
  if (!still_owned()) {
    throw Error(output_ + ": not written: " + path_ +
                " was replaced or removed by another process while this one wrote it (two "
                "commands writing one file: the other one's is kept)");
  }
}

void OwnedTemporary::sync() {
  check_owned();
  if (::fsync(fd_) != 0) throw Error(path_ + ": fsync failed: " + std::strerror(errno));
}

void OwnedTemporary::commit() {
  check_owned();
  // Let go: while the path names the file its inode stays; commit_file renames it, or removes
  // it on failure.
  ::close(std::exchange(fd_, -1));
  commit_file(path_, output_);
}

void OwnedTemporary::remove() noexcept {
  if (still_owned()) ::unlink(path_.c_str());
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  remove_temporary(tmp);
  // Exclusive and without following links: a link planted at the temporary path makes the
  // write fail instead of overwriting what it points to.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(tmp + ": cannot create: " + std::strerror(errno));
  try {  // no temporary left behind by a failed write (a full disk)
    size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        throw Error(tmp + ": write failed: " + std::strerror(err));
      }
      done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) throw Error(tmp + ": close failed: " + std::strerror(errno));
    commit_file(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  const std::string own = prefix + std::to_string(::getpid());
  std::error_code ec;
  fs::directory_iterator it(p.parent_path().empty() ? fs::path(".") : p.parent_path(), ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.rfind(prefix, 0) != 0 || name == own ||
        name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) {
      continue;
    }
    remove_temporary(it->path().string());
  }
}

void remove_files(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      throw Error(path + ": cannot replace: " + std::strerror(errno));
    }
  }
}

}  // namespace hpctrain
