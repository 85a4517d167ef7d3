// Line-at-a-time logging with rank prefixes and, for training, UTC timestamps.
#include "core/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/timer.hpp"

namespace hpctrain {
namespace {

std::mutex g_mutex;
int g_rank = 0;
int g_world_size = 1;
bool g_timestamps = false;

// Under g_mutex.
std::string stamp() { return g_timestamps ? utc_now() + " " : std::string(); }

void write_line(std::FILE* stream, const char* level, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string time = stamp();
  if (g_world_size > 1) {
    std::fprintf(stream, "%s[rank %d] %s%s\n", time.c_str(), g_rank, level, message.c_str());
  } else {
    std::fprintf(stream, "%s%s%s\n", time.c_str(), level, message.c_str());
  }
  std::fflush(stream);
}

}  // namespace

void set_log_rank(int rank, int world_size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_rank = rank;
  g_world_size = world_size;
}

void set_log_timestamps(bool on) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_timestamps = on;
}

int log_rank() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_rank;
}

bool log_names_rank() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_world_size > 1;
}

bool prints_for_all_ranks() {
  for (const char* name : {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return std::atoi(value) == 0;
  }
  return true;
}

void log_info(const std::string& message) {
  if (log_rank() != 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stdout, "%s%s\n", stamp().c_str(), message.c_str());
  std::fflush(stdout);
}

void log_warn(const std::string& message) { write_line(stderr, "warning: ", message); }
void log_error(const std::string& message) { write_line(stderr, "error: ", message); }

}  // namespace hpctrain
