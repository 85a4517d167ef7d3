// Error types and exit codes shared by every part of hpctrain.
// Library calls are checked through one macro per library (see comm/mpi_check.hpp,
// h5/h5.hpp); those macros capture file and line and call a function that throws.
#pragma once

#include <stdexcept>
#include <string>

namespace hpctrain {

// Process exit codes: the contract with job scripts (docs/contracts.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
  kExitStopped = 75,
};

// Any failure that should end the job. `exit_code` tells main what to return.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitFailure)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad usage, configuration or input data: exit 2 with one line naming file and key.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what, kExitUsage) {}
};

// Ends the process with `code` once its error has been printed: flushes the C and C++
// streams and exits without running atexit handlers. HDF5 tears itself down in one, and
// that teardown crashes on a file whose close failed (a full disk), which would turn a clean
// one-line error into a segmentation fault.
[[noreturn]] void exit_after_error(int code);

// A failure that another thread has begun to end the process with (the watchdog's
// MpiEnv::abort, which waits a moment before MPI_Abort so its line reaches the launcher):
// every other way of ending the process takes its code instead of its own, so that a job
// that printed "aborting" does not end with 0.
void begin_failing_exit(int code) noexcept;
// `code`, where no failing exit has begun; else this thread waits for it to end the process
// and ends it with its code should it not within a few seconds.
int ending_code(int code) noexcept;

// Throws Error("file:line: message") for internal invariants that must hold in
// release builds too (never use assert for these).
[[noreturn]] void fail_at(const char* file, int line, const std::string& message);

}  // namespace hpctrain

#define HT_REQUIRE(cond, msg)                                               \
  do {                                                                      \
    if (!(cond)) ::hpctrain::fail_at(__FILE__, __LINE__, std::string(msg)); \
  } while (0)
