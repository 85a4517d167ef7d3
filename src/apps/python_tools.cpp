#include "apps/python_tools.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace hpctrain {
namespace fs = std::filesystem;

bool is_python_tool(const std::string& command) {
  return command == "study" || command == "plot" || command == "scaling";
}

namespace {

// The folder holding hpctrain_tools: share/hpctrain/python beside the program (a build
// tree) or in the prefix above it (bin/hpctrain of an installation).
fs::path tools_dir(const fs::path& self) {
  const fs::path bin = self.parent_path();
  const fs::path tools = "share/hpctrain/python";
  for (const fs::path& p : {bin / tools, bin.parent_path() / tools}) {
    std::error_code ec;
    if (fs::is_regular_file(p / "hpctrain_tools/__main__.py", ec)) return p.lexically_normal();
  }
  throw UsageError("the Python tools (share/hpctrain/python/hpctrain_tools) are not beside " +
                   self.string() + " or in the prefix above it: rebuild or reinstall hpctrain");
}

}  // namespace

void exec_python_tool(const std::string& command, const std::vector<std::string>& args) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot tell where this program lies: /proc/self/exe: " + ec.message());
  const fs::path dir = tools_dir(self);
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = dir.string() + (old && *old ? ":" + std::string(old) : "");
  setenv("PYTHONPATH", path.c_str(), 1);

  std::vector<std::string> words = {"python3", "-m", "hpctrain_tools", command};
  if (command == "study") words.push_back("--hpctrain=" + self.string());
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  execvp("python3", argv.data());
  throw Error(std::string("cannot start python3 for 'hpctrain ") + command +
              "': " + std::strerror(errno) + " (Debian: apt install python3)");
}

}  // namespace hpctrain
