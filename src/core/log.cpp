// Line-at-a-time logging with rank prefixes.
#include "core/log.hpp"

#include <cstdio>
#include <mutex>

namespace hpctrain {
namespace {

std::mutex g_mutex;
int g_rank = 0;
int g_world_size = 1;

void write_line(std::FILE* stream, const char* level, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_world_size > 1) {
    std::fprintf(stream, "[rank %d] %s%s\n", g_rank, level, message.c_str());
  } else {
    std::fprintf(stream, "%s%s\n", level, message.c_str());
  }
  std::fflush(stream);
}

}  // namespace

void set_log_rank(int rank, int world_size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_rank = rank;
  g_world_size = world_size;
}

int log_rank() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_rank;
}

void log_info(const std::string& message) {
  if (log_rank() != 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stdout, "%s\n", message.c_str());
  std::fflush(stdout);
}

void log_warn(const std::string& message) { write_line(stderr, "warning: ", message); }
void log_error(const std::string& message) { write_line(stderr, "error: ", message); }

}  // namespace hpctrain
