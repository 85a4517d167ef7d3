// Names the file a thread was reading when the process dies of a fatal signal. HDF5 1.10
// crashes on some damaged files (tests/fuzz/ finds them), in a prefetch thread as readily
// as in start-up; instead of only "Segmentation fault" the process then prints
//   error: fatal signal SIGSEGV while reading FILE (a damaged file, or a bug in the library)
// and still dies of the signal (the handler that was there before, e.g. the default core
// dump or UCX's backtrace, runs next).
#pragma once

#include <string>

namespace hpctrain {

// Installs the handler for SIGSEGV, SIGBUS, SIGFPE and SIGILL; once per process, early in
// main (later calls do nothing).
void install_crash_notes();

// While one lives, this thread is reading `path`: the string must outlive it. Scopes nest.
class CrashNote {
 public:
  explicit CrashNote(const std::string& path);
  ~CrashNote();
  CrashNote(const CrashNote&) = delete;
  CrashNote& operator=(const CrashNote&) = delete;

 private:
  const char* outer_;
};

}  // namespace hpctrain
