#include "apps/init.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/installation.hpp"
#include "core/option_words.hpp"

namespace hpctrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kInitUsage =
    "usage: hpctrain init DIR [--config NAME] [--force]\n"
    "       hpctrain init --list\n"
    "\n"
    "Copies a starter set into DIR (made if missing) from this installation's\n"
    "share/hpctrain folder: an example config, the Slurm job script that runs it and\n"
    "launch.sh (mpiexec with restarts). A study (hpctrain study) brings the training\n"
    "config it names and study.sbatch instead of train_single_node.sbatch. The job\n"
    "scripts run hpctrain from PATH, so they can be submitted from DIR.\n"
    "\n"
    "  --config NAME   the example config, fashion_mnist_mlp by default (--list names them)\n"
    "  --force         overwrite files that exist (otherwise nothing is written, exit 2)\n"
    "  --list          the example configs, each with the first line of its description\n";

constexpr const char* kDefaultConfig = "fashion_mnist_mlp";

// The first comment line of a config: what it trains.
std::string first_comment(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) return line.substr(2);
  }
  return "";
}

int list_configs() {
  const fs::path dir = share_dir("configs") / "configs";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::cout << f.stem().string() << "\n    " << first_comment(f) << "\n";
  }
  return kExitOk;
}

// The training config a study file names (its top-level `config:` key), "" for a
// training config.
std::string study_base_config(const fs::path& file) {
  try {
    const YAML::Node root = YAML::LoadFile(file.string());
    if (root.IsMap() && root["config"] && root["config"].IsScalar()) {
      return root["config"].as<std::string>();
    }
  } catch (const YAML::Exception& e) {
    throw Error(file.string() + ": cannot read the example config: " + e.what());
  }
  return "";
}

}  // namespace

int cmd_init(const std::vector<std::string>& args) {
  std::string dir_arg;
  std::string name = kDefaultConfig;
  bool force = false;
  if (is_help(args)) {
    std::cout << kInitUsage;
    return kExitOk;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--list") return list_configs();
    if (a == "--force") {
      force = true;
    } else if (a == "--config") {
      if (i + 1 >= args.size()) {
        throw UsageError("init: --config needs a NAME (hpctrain init --list names them)");
      }
      name = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("init: unknown option '" + a + "' (see hpctrain init --help)");
    } else if (dir_arg.empty()) {
      dir_arg = a;
    } else {
      throw UsageError("init: expected one DIR, got '" + dir_arg + "' and '" + a + "'");
    }
  }
  if (dir_arg.empty()) throw UsageError("init: expected DIR (see hpctrain init --help)");
  if (name.size() > 5 && name.substr(name.size() - 5) == ".yaml") name.resize(name.size() - 5);

  const fs::path share = share_dir("configs");
  const fs::path config = share / "configs" / (name + ".yaml");
  if (name.find('/') != std::string::npos || !fs::is_regular_file(config)) {
    throw UsageError("init: --config " + name + ": no such example config in " +
                     (share / "configs").string() + " (hpctrain init --list names them)");
  }
  const std::string base = study_base_config(config);
  std::vector<fs::path> sources = {config};
  if (!base.empty()) sources.push_back(config.parent_path() / base);
  sources.push_back(share / "jobs" / (base.empty() ? "train_single_node.sbatch" : "study.sbatch"));
  sources.push_back(share / "jobs" / "launch.sh");

  const fs::path dir = dir_arg;
  std::vector<fs::path> targets;
  for (const fs::path& src : sources) {
    if (!fs::is_regular_file(src)) {
      throw UsageError("init: " + src.string() + " is missing: reinstall hpctrain");
    }
    targets.push_back(dir / src.filename());
    std::error_code ec;
    const fs::file_type there = fs::symlink_status(targets.back(), ec).type();
    if (there == fs::file_type::directory) {  // --force replaces files, not folders
      throw UsageError("init: " + targets.back().string() + " is a directory; nothing written");
    }
    if (!force && there != fs::file_type::not_found) {
      throw UsageError("init: " + targets.back().string() +
                       " exists already; nothing written (--force overwrites)");
    }
  }
  std::error_code ec;
  if (!make_directories(dir.string(), ec))
    throw UsageError("init: cannot make " + dir.string() + ": " + ec.message());
  for (size_t i = 0; i < sources.size(); ++i) {
    // Through a temporary, renamed over the target (a link there is replaced, never
    // written through): a full disk leaves the old file, not a truncated script.
    const std::string temp = targets[i].string() + ".tmp";
    remove_temporary(temp);
    if (!fs::copy_file(sources[i], temp, ec) || ec) {
      fs::remove(temp, ec);
      throw Error("init: cannot write " + targets[i].string() + ": " + ec.message());
    }
    commit_file(temp, targets[i].string());
    std::cout << "wrote " << targets[i].string() << "\n";
  }

  const std::string run_config = config.filename().string();
  const std::string job = sources[base.empty() ? 1 : 2].filename().string();
  const std::string verb = base.empty() ? "train" : "study";
  std::cout << "next, in " << dir.string() << ":\n";
  std::ifstream in(base.empty() ? config : sources[1]);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.find("data/fashion-mnist/") != std::string::npos) {
    std::cout << "  hpctrain-data fashion-mnist --out data/fashion-mnist   # the data it reads\n";
  } else {
    std::cout << "  # make the files its data: section names (hpctrain-data --help)\n";
  }
  if (base.empty()) std::cout << "  mpiexec -n 2 hpctrain train " << run_config << "\n";
  std::cout << "  sbatch " << job << " " << run_config << "   # " << verb << " under Slurm\n";
  return kExitOk;
}

}  // namespace hpctrain
