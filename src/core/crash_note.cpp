#include "core/crash_note.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace hpctrain {
namespace {

thread_local const char* t_reading = nullptr;

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
struct sigaction g_previous[sizeof(kSignals) / sizeof(kSignals[0])];
std::atomic<bool> g_installed{false};

void put(const char* text) {
  const size_t n = std::strlen(text);
  const ssize_t unused = write(STDERR_FILENO, text, n);  // best effort: nothing to do else
  (void)unused;
}

// Async-signal-safe: write(2), strlen, sigaction, raise. It puts the previous handler back
// and returns: a faulting instruction runs again and the signal then goes to that handler
// (the default one dumps core), so the process still dies of it; a signal that was sent
// (kill, raise: si_code <= 0) is raised again, to the same end.
void on_fatal_signal(int sig, siginfo_t* info, void*) {
  const char* path = t_reading;
  if (path != nullptr) {
    put("error: fatal signal ");
    put(sig == SIGSEGV  ? "SIGSEGV"
        : sig == SIGBUS ? "SIGBUS"
        : sig == SIGFPE ? "SIGFPE"
                        : "SIGILL");
    put(" while reading ");
    put(path);
    put(" (a damaged file, or a bug in the library reading it)\n");
  }
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    if (kSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
  }
  if (info == nullptr || info->si_code <= 0) raise(sig);
}

}  // namespace

void install_crash_notes() {
  if (g_installed.exchange(true)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    sigaction(kSignals[i], &action, &g_previous[i]);
  }
}

CrashNote::CrashNote(const std::string& path) : outer_(t_reading) { t_reading = path.c_str(); }

CrashNote::~CrashNote() { t_reading = outer_; }

}  // namespace hpctrain
