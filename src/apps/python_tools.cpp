#include "apps/python_tools.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/installation.hpp"

namespace hpctrain {
namespace fs = std::filesystem;

bool is_python_tool(const std::string& command) {
  return command == "study" || command == "plot" || command == "scaling";
}

void exec_python_tool(const std::string& command, const std::vector<std::string>& args) {
  const fs::path self = program_path();
  const fs::path dir = share_dir("python/hpctrain_tools/__main__.py") / "python";
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = dir.string() + (old && *old ? ":" + std::string(old) : "");
  setenv("PYTHONPATH", path.c_str(), 1);

  std::vector<std::string> words = {"python3", "-m", "hpctrain_tools", command};
  if (command == "study") words.push_back("--hpctrain=" + self.string());
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  // The study driver gets its stop signals blocked (a mask survives exec) and unblocks them
  // once its handlers are set: one sent while Python starts (a Slurm warning at once, a
  // Ctrl-C) then waits for them, where it killed the driver (138, no requeue).
  sigset_t stops;
  sigemptyset(&stops);
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&stops, s);
  if (command == "study") sigprocmask(SIG_BLOCK, &stops, nullptr);
  execvp("python3", argv.data());
  sigprocmask(SIG_UNBLOCK, &stops, nullptr);
  throw Error(std::string("cannot start python3 for 'hpctrain ") + command +
              "': " + std::strerror(errno) + " (Debian: apt install python3)");
}

}  // namespace hpctrain
