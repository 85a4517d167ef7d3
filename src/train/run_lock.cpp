#include "train/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "core/host.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"

namespace hpctrain {
namespace {

// The holder's line ("host h, pid p, Slurm job j, since t"), or what can be said without it.
std::string holder(int fd) {
  char text[512] = {};
  const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  std::string line = n > 0 ? std::string(text, static_cast<size_t>(n)) : std::string();
  if (const size_t end = line.find('\n'); end != std::string::npos) line.resize(end);
  return line.empty() ? "a process that has not said who it is" : line;
}

}  // namespace

RunLock::RunLock(const std::string& dir, const std::string& key, const std::string& source_file) {
  const std::string path = dir + "/hpctrain.lock";
  // Never through a symbolic link, nor on anything but a regular file: the holder's line
  // truncates the file it writes to.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw UsageError(
        source_file + ": " + key + ": cannot open " + path + ": " +
        (err == ELOOP ? std::string("it is a symbolic link; remove it") : std::strerror(err)));
  }
  struct stat st {};
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw UsageError(source_file + ": " + key + ": " + path + " is not a regular file; remove it");
  }
  const double deadline = now_seconds() + kWaitSeconds;
  bool said = false;
  while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) {  // ENOLCK, EOPNOTSUPP: a file system without locks
      log_warn(path + ": no file locks here (" + std::strerror(err) +
               "): a second job given this " + key + " would not be stopped");
      return;
    }
    if (now_seconds() >= deadline) {
      const std::string who = holder(fd_);
      ::close(fd_);
      fd_ = -1;
      throw UsageError(source_file + ": " + key + ": " + dir +
                       " is in use by another training run (" + who + "; " + path +
                       "): two runs in one directory would overwrite each other's checkpoints; "
                       "let it end, or give this run another " +
                       key);
    }
    if (!said) {
      log_info("waiting up to " + std::to_string(static_cast<int>(kWaitSeconds)) + " s for " +
               path + " (" + holder(fd_) + ")");
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const char* job = std::getenv("SLURM_JOB_ID");
  const std::string line = "host " + host_name() + ", pid " + std::to_string(getpid()) +
                           (job != nullptr ? std::string(", Slurm job ") + job : "") + ", since " +
                           utc_now() + "\n";
  // Best effort: the line is for the message of a second job, the lock is the flock.
  if (ftruncate(fd_, 0) == 0 && pwrite(fd_, line.data(), line.size(), 0) < 0) {
    log_warn(path + ": cannot write who holds it: " + std::strerror(errno));
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace hpctrain
