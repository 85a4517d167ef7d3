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
  const std::string line = one_line(message);
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string time = stamp();
  if (g_world_size > 1) {
    std::fprintf(stream, "%s[rank %d] %s%s\n", time.c_str(), g_rank, level, line.c_str());
  } else {
    std::fprintf(stream, "%s%s%s\n", time.c_str(), level, line.c_str());
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

std::string one_line(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      const char* hex = "0123456789abcdef";
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace hpctrain
