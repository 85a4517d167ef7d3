// Checkpoints the system cannot read: an error that ends the run, not a corrupt file that
// --resume auto skips for an older one.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/checkpoint_store.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

CheckpointState io_test_state(int64_t step) {
  CheckpointState s;
  s.step = step;
  s.epoch = step / 10;
  s.step_in_epoch = step % 10;
  s.steps_per_epoch = 10;
  s.global_batch = 8;
  s.world_size = 1;
  s.strategy = "allreduce";
  s.config_yaml = "run:\n  name: x\n";
  s.architecture = "input 1x2x2\n";
  s.created = "2026-01-01T00:00:00Z";
  s.arrays[kParamsArray] = {1, 2, 3, 4};
  return s;
}

// Reads `dir` with --resume auto's scan in a child process that cannot read the file
// `unreadable` (mode 000; root, which ignores modes, becomes nobody first) and exits 0
// when the scan ends in an Error, printing it, rather than falling back or calling the
// file corrupt.
void scan_without_permission(const std::string& dir, const std::string& unreadable) {
  if (::geteuid() == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
      std::fprintf(stderr, "cannot become nobody\n");
      std::_Exit(5);
    }
  }
  if (::access(unreadable.c_str(), R_OK) == 0) {
    std::fprintf(stderr, "the file is still readable\n");
    std::_Exit(6);
  }
  if (::access(checkpoint_path(dir, 10).c_str(), R_OK) != 0) {
    std::fprintf(stderr, "the test directory %s is not readable by nobody\n", dir.c_str());
    std::_Exit(7);
  }
  try {
    const auto loaded = load_newest_valid(dir);
    std::fprintf(stderr, "fell back to %s\n", loaded ? loaded->path.c_str() : "nothing");
    std::_Exit(3);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "called corrupt: %s\n", e.what());
    std::_Exit(4);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::_Exit(0);
  }
}

// A newest checkpoint that cannot be opened (EACCES here; EIO alike) says nothing about its
// contents: skipping it would restart from an older one, and retention would then delete
// the newer ones. The scan ends in an Error naming the file and the reason; nothing is
// removed.
TEST(CheckpointIo, UnreadableNewestIsAnErrorNotSkipped) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Below the system's temporary directory, which nobody can reach.
  const std::string dir = (fs::temp_directory_path() / "ht_ckpt_io_eacces").string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  for (int64_t step : {10, 20, 30}) {
    write_checkpoint_file(checkpoint_path(dir, step), io_test_state(step));
  }
  const std::string newest = checkpoint_path(dir, 30);
  ::chmod(newest.c_str(), 0);
  EXPECT_EXIT(scan_without_permission(dir, newest), ::testing::ExitedWithCode(0),
              "ckpt-000000000030.h5: cannot open: Permission denied");
  for (int64_t step : {10, 20, 30}) EXPECT_TRUE(fs::exists(checkpoint_path(dir, step))) << step;
}

}  // namespace
}  // namespace hpctrain
