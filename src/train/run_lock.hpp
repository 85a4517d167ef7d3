// The run directory's lock, RUN_DIR/hpctrain.lock: rank 0 of `train` holds it for the whole
// run, so that a second job given the same run.dir (a job submitted twice, a launcher
// started again while the first still runs) stops with exit 2 before it writes anything,
// instead of writing checkpoints, metrics.csv and summary.json over the first's. A flock:
// the kernel drops it when its holder ends, kill -9 included (a job resumed at once after a
// kill waits a few seconds for the killed ranks to go); NFS and Lustre (mounted with flock)
// hold it across nodes. Where the file system has no locks it is a warning. A checkpoint.dir
// outside the run directory has a lock of its own, as two runs sharing it would prune and
// overwrite each other's checkpoints.
#pragma once

#include <string>

namespace hpctrain {

class RunLock {
 public:
  // How long a run waits for a holder to end: the ranks of a job killed just before take
  // that long at most to go.
  static constexpr double kWaitSeconds = 10.0;

  // Takes the lock of `dir` (which exists), waiting up to kWaitSeconds for a holder to
  // end; then UsageError naming the holder (host, pid, Slurm job, since when).
  // `source_file` and `key` (run.dir, checkpoint.dir) name the config and key in messages.
  RunLock(const std::string& dir, const std::string& key, const std::string& source_file);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace hpctrain
