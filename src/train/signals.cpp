// Async-signal-safe stop request: one lock-free atomic written by the handler.
#include "train/signals.hpp"

#include <atomic>
#include <csignal>

namespace hpctrain {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need a lock-free flag");

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig, std::memory_order_relaxed); }

}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking calls resume; the step loop polls the flag
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Ctrl-C: the same stop; a second one has the default effect (the user insists).
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
}

int stop_signal() { return g_stop_signal.load(std::memory_order_relaxed); }

}  // namespace hpctrain
