// hpctrain: the command-line entry point. Parses the subcommand, starts MPI where
// the subcommand needs it, and turns errors into exit codes (docs/contracts.md): one line
// on stderr, MPI_Abort when ranks may be inside a collective.
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench_allreduce.hpp"
#include "apps/export_model.hpp"
#include "apps/generate.hpp"
#include "apps/init.hpp"
#include "apps/model_target.hpp"
#include "apps/python_tools.hpp"
#include "backend/blas_kernels.hpp"
#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "comm/mpi_env.hpp"
#include "config/config.hpp"
#include "config/config_reference.hpp"
#include "core/crash_note.hpp"
#include "core/deadline.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/option_words.hpp"
#include "core/version.hpp"
#include "data-tools/inspect_data.hpp"
#include "data/dataset_files.hpp"
#include "h5/h5.hpp"
#include "nn/alloc_error.hpp"
#include "nn/layer_profile.hpp"
#include "nn/model_summary.hpp"
#include "nn/presets.hpp"
#include "train/backend_choice.hpp"
#include "train/catalog.hpp"
#include "train/memory_check.hpp"
#include "train/model_data.hpp"
#include "train/run_plan.hpp"
#include "train/signals.hpp"
#include "train/trainer.hpp"

namespace hpctrain {
namespace {

constexpr const char* kUsage =
    "usage: hpctrain <command> [options]\n"
    "\n"
    "commands:\n"
    "  train CONFIG.yaml [--set key.path=value]... [--resume auto|never|PATH]\n"
    "                                                train a model (run under mpirun/srun)\n"
    "  eval RUN_DIR|CHECKPOINT.h5|CONFIG.yaml        evaluate the trained model (val and test)\n"
    "  generate TARGET --prompt TEXT [--length N]    text from a language model\n"
    "  export TARGET --format F --out FILE           the weights for PyTorch, ONNX, HDF5\n"
    "  inspect FILE.h5                               describe a data file or a checkpoint\n"
    "  inspect CONFIG.yaml [--input CxHxW --classes N] [--time [--batch N]]\n"
    "                                                the model: layers, shapes, params, FLOPs\n"
    "  config --list | --markdown                    every config key: type, default, meaning\n"
    "  config CONFIG.yaml [--get key.path]           the config a run would use, or one key\n"
    "  init DIR [--config NAME]                      copy an example config and job script\n"
    "  bench allreduce [options]                     ring vs MPI_Allreduce bandwidth\n"
    "  bench checkpoint [options]                    checkpoint vs plain write bandwidth\n"
    "  study STUDY.yaml [--out DIR] [--set ...]      a scaling study: variants x repeats,\n"
    "                                                table, scaling model, plots (python3)\n"
    "  plot run|study|allreduce PATH                 PNG plots of a run, a study or a\n"
    "                                                bench allreduce result (matplotlib)\n"
    "  scaling --step-ms T --params N ...            the scaling model's predictions\n"
    "\n"
    "Run 'hpctrain <command> --help' for a command's options; 'hpctrain --version' names\n"
    "the backends built in, the CUDA devices visible and OpenBLAS's kernels.\n";

constexpr const char* kTrainUsage =
    "usage: hpctrain train CONFIG.yaml [--set key.path=value]...\n"
    "                      [--resume auto|never|PATH|auto:PATH]\n"
    "\n"
    "Trains the model CONFIG.yaml describes on every rank of the MPI job, e.g.\n"
    "  mpirun -n 2 hpctrain train configs/fashion_mnist_mlp.yaml --set train.epochs=3\n"
    "\n"
    "  --set key.path=value   override one config key (repeatable), value in YAML syntax\n"
    "  --resume MODE          auto (default): continue from the newest valid checkpoint in\n"
    "                         checkpoint.dir, or start fresh if there is none; never: start\n"
    "                         fresh (refused if checkpoint.dir holds checkpoints); PATH: that\n"
    "                         checkpoint; auto:PATH: as auto, but PATH where there is none\n"
    "                         (the job scripts' restarts of a run given --resume PATH)\n"
    "\n"
    "Outputs go to run.dir (default runs/<run.name>): config.yaml, metrics.csv,\n"
    "summary.json, checkpoints/. SIGUSR1, SIGTERM or SIGINT: checkpoint, then exit 75.\n"
    "Exit codes: 0 done, 2 bad config or input, 75 stopped by a signal, 1 other failure.\n";

constexpr const char* kInspectUsage =
    "usage: hpctrain inspect FILE.h5 [--timeout SECONDS]\n"
    "       hpctrain inspect CONFIG.yaml [--set key.path=value]... [--input CxHxW --classes N]\n"
    "                                    [--time [--batch N]] [--ranks N]\n"
    "\n"
    "Data file: prints the shape, element type, classes and class histogram.\n"
    "Checkpoint: prints the cursor, model and arrays, and verifies every checksum\n"
    "(exit 2 if one fails). Either gives up with exit 1 after --timeout seconds (default\n"
    "60; 0: no limit): HDF5 loops on some damaged files.\n"
    "Config (.yaml/.yml): prints the model it builds, one row per layer with output shape,\n"
    "parameters and forward MFLOPs per sample, then the totals. The input shape and class\n"
    "count come from data.train, or from --input and --classes (then data.train must be\n"
    "set, as for any config, but is not read).\n"
    "--time trains the model on random input on the config's device and precision (10\n"
    "warm-up steps, then medians of 20) and adds each layer's and each ResNet block part's\n"
    "forward and backward time and forward GFLOP/s (the device synchronised around each),\n"
    "and the whole step's time at full speed; --batch defaults to train.batch_size.\n"
    "--ranks N also checks what a run on N ranks would refuse for that count (the batch\n"
    "shared over data.train's samples, strategy async's servers): exit 2 as the run would.\n";

// "1x148x197" -> {1, 148, 197}; throws UsageError naming the option otherwise.
Dims parse_input_dims(const std::string& text) {
  Dims dims;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('x', start), text.size());
    const std::string part = text.substr(start, end - start);
    if (part.empty() || part.size() > 6 ||
        part.find_first_not_of("0123456789") != std::string::npos || std::stoll(part) < 1) {
      throw UsageError("inspect: --input: expected CxHxW or F with sizes 1 to 999999, got '" +
                       text + "'");
    }
    dims.push_back(std::stoll(part));
    start = end + 1;
  }
  if (dims.size() != 1 && dims.size() != 3) {
    throw UsageError("inspect: --input: expected CxHxW or F, got '" + text + "'");
  }
  // the bound a data file's samples have (dataset_file.cpp's check_extent)
  if (const int64_t elems =
          std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
      elems > (int64_t{1} << 31)) {
    throw UsageError("inspect: --input: '" + text + "' is a sample of " + std::to_string(elems) +
                     " elements, more than 2^31");
  }
  return dims;
}

// The value of inspect's count option `option`, from `lo` to 999999; UsageError otherwise.
int64_t inspect_count(const std::string& option, const std::string& text, int64_t lo) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 6 || std::stoll(text) < lo) {
    throw UsageError("inspect: " + option + ": expected an integer from " + std::to_string(lo) +
                     " to 999999, got '" + text + "'");
  }
  return std::stoll(text);
}

void inspect_config(const std::string& path, const std::vector<std::string>& overrides,
                    const std::string& input, const std::string& classes, bool time,
                    const std::string& batch_text, const std::string& ranks_text) {
  if (!batch_text.empty() && !time) throw UsageError("inspect: --batch goes with --time");
  const int ranks =
      ranks_text.empty() ? 0 : static_cast<int>(inspect_count("--ranks", ranks_text, 1));
  if (ranks > 0 && !input.empty()) {
    throw UsageError("inspect: --ranks reads data.train's samples: give it without --input");
  }
  const Config config = load_config(path, overrides, catalog());
  Dims dims;
  ModelData data;
  std::string source;
  int64_t rows = 0;
  if (input.empty() != classes.empty()) {
    throw UsageError("inspect: --input and --classes go together");
  }
  if (!input.empty()) {
    // --input/--classes describe images or features; token ids come with their vocabulary
    // and, for a language model, a label per step, which only the data file gives.
    for (const LayerSpec& layer : config.model.layers) {
      if (layer.type == "embedding") {
        throw UsageError(path + ": model.layers: embedding '" + layer.name +
                         "' reads token data: inspect this config without --input and "
                         "--classes (its data.train is read)");
      }
    }
    dims = parse_input_dims(input);
    data.num_classes = static_cast<int>(inspect_count("--classes", classes, 2));
    source = "--input/--classes";
  } else {
    const std::unique_ptr<DataSource> train = open_training_data(config);
    const DatasetShape& shape = train->shape();
    dims = {shape.c, shape.h, shape.w};
    data = model_data(shape);
    source = train->path();
    rows = shape.n;
  }
  const int64_t batch =
      batch_text.empty() ? config.train.batch_size : inspect_count("--batch", batch_text, 1);
  const int threads = config.run.threads > 0
                          ? config.run.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::unique_ptr<Backend> backend =
      time ? make_backend(config, threads, 0, 0) : std::make_unique<CpuBackend>(1);
  const int num_classes = data.num_classes;
  // A model past the node's memory (a large --input before a dense layer) is exit 2, not
  // std::bad_alloc: the parameters, their gradients and one batch's activations.
  const auto fits = [&](const ModelSize& size) {
    MemoryNeed need;
    need.model_bytes = model_bytes(size, 0, dtype_size(backend->act_type()));
    check_memory_fits(input.empty() ? path : path + " with --input " + input, need,
                      std::string(backend->name()) == "cpu", available_memory(), 1);
  };
  data.act_type = activation_type(config.precision);
  std::vector<std::unique_ptr<Layer>> layers = build_layers(config.model, data, dims, path);
  std::optional<Model> built;
  try {
    built.emplace(*backend, std::move(layers), dims, time ? batch : 1, fits);
  } catch (const std::bad_alloc& e) {
    throw UsageError(allocation_refusal(path, e));
  }
  Model& model = *built;
  if (ranks > 0) check_world_size(config, ranks, rows, source, model.param_count());
  std::cout << "model " << config.model.preset << " from " << path << ", " << num_classes
            << " classes (shapes from " << source << ")\n";
  if (!time) {
    std::cout << model_summary(model);
    return;
  }
  model.init_params(config.run.seed);
  const LayerTimes t = time_layers(model, batch, num_classes, /*warmup=*/10, /*reps=*/20);
  std::cout << "timed on " << backend->name() << ", precision " << to_string(config.precision)
            << ", batch " << batch << "\n"
            << model_summary(model, &t);
}

// Runs the set-up trainer's work; a failure on one rank ends the whole job (MPI_Abort), so
// that no rank waits in a collective for it until the watchdog fires.
template <typename Work>
int run_or_abort(const MpiEnv& env, Work&& work) {
  try {
    return work();
  } catch (const Error& e) {
    log_error(e.what());
    if (env.size() > 1) MpiEnv::abort(e.exit_code());
    return e.exit_code();
  } catch (const std::exception& e) {
    log_error(e.what());
    if (env.size() > 1) MpiEnv::abort(kExitFailure);
    return kExitFailure;
  }
}

// A rank's ending once its work is done: releasing the trainer (its threads, files and
// device) and waiting for the other ranks to end theirs have distributed.timeout_seconds
// each; MPI_Finalize then has at most kFinalizeSeconds (every rank enters it at once, and
// MPICH 4.0 with UCX over TCP can still hang there: MpiEnv::wait_for_all), and the exit handlers
// the timeout again. A rank still in one after that says which and ends with `code`: a job
// whose outputs are written would otherwise hold its allocation until its time limit.
constexpr double kFinalizeSeconds = 10;

int end_run(std::unique_ptr<Trainer>& trainer, MpiEnv& env, int code) {
  const double seconds = trainer->config().distributed.timeout_seconds;
  const auto still = [&](const char* step, double bound, const char* why) {
    char text[320];
    std::snprintf(text, sizeof(text),
                  "still %s after %g s (%s), its work done: this rank ends now with exit code %d",
                  step, bound, why, code);
    return std::string(text);
  };
  const char* timeout = "distributed.timeout_seconds";
  {
    const Deadline bound(seconds,
                         still("releasing the trainer (threads, files, device)", seconds, timeout),
                         code, /*warning=*/true);
    trainer.reset();
  }
  {
    const Deadline bound(seconds,
                         still("waiting for the other ranks to end their work", seconds, timeout),
                         code, /*warning=*/true);
    env.wait_for_all();
  }
  {
    const double finalize =
        seconds >= kNoBoundSeconds ? seconds : std::min(seconds, kFinalizeSeconds);
    const Deadline bound(
        finalize, still("in MPI_Finalize", finalize, "MPICH 4.0 with UCX over TCP can hang there"),
        code, /*warning=*/true);
    env.finalize();
  }
  // Then the libraries' exit handlers (CUDA's, MPI's), bounded alike: a Deadline that is
  // never destroyed outlives main's objects (reachable from this static: no leak report).
  static const Deadline* const exit_handlers = new Deadline(
      seconds, still("in the libraries' exit handlers", seconds, timeout), code, /*warning=*/true);
  (void)exit_handlers;
  return code;
}

int cmd_train(int* argc, char*** argv, const std::vector<std::string>& args) {
  if (is_help(args)) {
    if (prints_for_all_ranks()) std::cout << kTrainUsage;
    return kExitOk;
  }
  std::string config_path, resume = "auto";
  std::vector<std::string> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--set") {
      if (i + 1 >= args.size()) throw UsageError("--set: expected key.path=value");
      overrides.push_back(args[++i]);
      if (overrides.back().find('=') == std::string::npos || overrides.back().front() == '=') {
        throw UsageError("--set " + overrides.back() + ": expected key.path=value");  // bare line
      }
    } else if (args[i] == "--resume") {
      if (i + 1 >= args.size()) {
        throw UsageError("--resume: expected auto, never, a checkpoint path or auto:PATH");
      }
      resume = args[++i];
      if (resume.empty() || resume == kResumeAutoElse) {
        throw UsageError("--resume: expected auto, never, a checkpoint path or auto:PATH");
      }
    } else if (args[i].rfind("--", 0) == 0) {
      throw UsageError("train: unknown option '" + args[i] + "' (see hpctrain train --help)");
    } else if (config_path.empty()) {
      config_path = args[i];
    } else {
      throw UsageError("train: more than one config file given ('" + config_path + "', '" +
                       args[i] + "')");
    }
  }
  if (config_path.empty()) throw UsageError("train: no config file given (see --help)");

  // Before any start-up work (MPI, data, resume): a stop signal that arrives then is kept
  // and honoured at the first step, instead of killing the rank without a checkpoint.
  install_stop_signals();
  MpiEnv env(argc, argv);
  std::unique_ptr<Trainer> trainer;
  const int code = set_up_trainer(
      env, [&] { return load_config(config_path, overrides, catalog()); }, resume, trainer,
      Trainer::Purpose::kTrain);
  if (code != 0) return code;
  return end_run(trainer, env, run_or_abort(env, [&] { return trainer->run(); }));
}

constexpr const char* kEvalUsage =
    "usage: hpctrain eval TARGET [--checkpoint PATH] [--set key.path=value]...\n"
    "\n"
    "Evaluates a trained model on data.val and data.test across all ranks; prints loss and\n"
    "accuracy and writes run.dir/eval.json. TARGET is one of\n"
    "  RUN_DIR        a run directory: its config.yaml and its newest valid checkpoint\n"
    "                 (training always checkpoints its final state there);\n"
    "  CHECKPOINT.h5  a checkpoint, with the config stored in it;\n"
    "  CONFIG.yaml    a config: the newest valid checkpoint in its checkpoint.dir.\n"
    "--checkpoint PATH evaluates that checkpoint instead.\n";

int cmd_eval(int* argc, char*** argv, const std::vector<std::string>& args) {
  if (is_help(args)) {
    if (prints_for_all_ranks()) std::cout << kEvalUsage;
    return kExitOk;
  }
  TargetArgs target;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!take_target_arg(args, i, target, "eval")) {
      throw UsageError("eval: unknown or incomplete option '" + args[i] + "' (see --help)");
    }
  }
  if (target.target.empty()) {
    throw UsageError("eval: expected a run directory, a checkpoint or a config (see --help)");
  }
  MpiEnv env(argc, argv);
  std::unique_ptr<Trainer> trainer;
  std::string resume = target.checkpoint.empty() ? "auto" : target.checkpoint;
  const int code = set_up_trainer(
      env,
      [&] {
        ModelTarget t = resolve_model_target(target);
        resume = t.checkpoint;
        // Evaluation exchanges nothing: every rank evaluates one model, the average of a
        // checkpoint's per-rank copies (strategy average), on any number of ranks (strategy
        // async needs more than its servers).
        t.config.distributed.strategy = "allreduce";
        return std::move(t.config);
      },
      resume, trainer, Trainer::Purpose::kEval);
  if (code != 0) return code;
  return end_run(trainer, env, run_or_abort(env, [&] { return trainer->evaluate_checkpoint(); }));
}

int cmd_inspect(const std::vector<std::string>& args) {
  if (is_help(args)) {
    if (prints_for_all_ranks()) std::cout << kInspectUsage;
    return kExitOk;
  }
  std::string file, input, classes, batch, timeout, ranks;
  bool time = false;
  std::vector<std::string> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if (args[i] == "--time") {
      time = true;
    } else if (args[i] == "--batch" && has_value) {
      batch = args[++i];
    } else if (args[i] == "--set" && has_value) {
      overrides.push_back(args[++i]);
    } else if (args[i] == "--input" && has_value) {
      input = args[++i];
    } else if (args[i] == "--classes" && has_value) {
      classes = args[++i];
    } else if (args[i] == "--timeout" && has_value) {
      timeout = args[++i];
    } else if (args[i] == "--ranks" && has_value) {
      ranks = args[++i];
    } else if (args[i].rfind("--", 0) == 0) {
      throw UsageError("inspect: unknown or incomplete option '" + args[i] + "' (see --help)");
    } else if (file.empty()) {
      file = args[i];
    } else {
      throw UsageError("inspect: expected one file (see --help)");
    }
  }
  if (file.empty()) throw UsageError("inspect: expected FILE.h5 or CONFIG.yaml (see --help)");
  std::string extension = std::filesystem::path(file).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == ".yaml" || extension == ".yml") {  // CONFIG.YAML too
    if (!timeout.empty()) throw UsageError("inspect: --timeout applies to a FILE.h5 only");
    inspect_config(file, overrides, input, classes, time, batch, ranks);
    return kExitOk;
  }
  if (!overrides.empty() || !input.empty() || !classes.empty() || time || !batch.empty() ||
      !ranks.empty()) {
    throw UsageError(
        "inspect: --set, --input, --classes, --time, --batch and --ranks apply to a "
        "CONFIG.yaml only");
  }
  const double seconds = timeout.empty() ? kInspectSeconds : inspect_timeout(timeout);
  const Deadline deadline(seconds, inspect_timeout_message(file, seconds), kExitFailure);
  const std::string name = std::filesystem::path(file).filename().string();
  if (name.rfind("ckpt-", 0) == 0 || is_checkpoint_file(file)) {
    // A checkpoint that fails verification is bad input: exit 2.
    if (!inspect_checkpoint_file(file, std::cout)) {
      throw UsageError(file + ": checkpoint failed verification");
    }
    return kExitOk;
  }
  inspect_data_file(file, std::cout);
  return kExitOk;
}

constexpr const char* kConfigUsage =
    "usage: hpctrain config --list\n"
    "       hpctrain config --markdown\n"
    "       hpctrain config CONFIG.yaml [--set key.path=value]... [--get key.path]\n"
    "\n"
    "--list prints every key a config file may hold, one per line: its path, type,\n"
    "default, meaning and limits, then the keys of each layer type of model.layers and\n"
    "the exchange strategies. --markdown prints the same reference as Markdown (the\n"
    "repository's docs/config.md is this output).\n"
    "CONFIG.yaml prints the config a run of it would use (the run directory's\n"
    "config.yaml): every key that applies, defaults resolved, after the --set overrides;\n"
    "with --get, only that key's value (a list or section in YAML flow style), e.g.\n"
    "  hpctrain config configs/fashion_mnist_mlp.yaml --get run.dir\n"
    "Nothing else is read: data files and checkpoints need not exist.\n";

int cmd_config(const std::vector<std::string>& args) {
  if (args.empty() || is_help(args)) {
    if (prints_for_all_ranks()) (args.empty() ? std::cerr : std::cout) << kConfigUsage;
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args.size() == 1 && args[0] == "--list") {
    std::cout << config_reference_text(catalog());
    return kExitOk;
  }
  if (args.size() == 1 && args[0] == "--markdown") {
    std::cout << config_reference_markdown(catalog());
    return kExitOk;
  }
  if (args[0].empty() || args[0][0] == '-') {
    throw UsageError("config: expected --list, --markdown or CONFIG.yaml (see --help)");
  }
  std::vector<std::string> overrides;
  std::optional<std::string> key;
  for (size_t i = 1; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if (args[i] == "--set" && has_value) {
      overrides.push_back(args[++i]);
    } else if (args[i] == "--get" && has_value && !key) {
      key = args[++i];
    } else {
      throw UsageError("config: unknown, repeated or incomplete option '" + args[i] +
                       "' (see --help)");
    }
  }
  const Config config = load_config(args[0], overrides, catalog());
  if (!key) {
    std::cout << config_to_yaml(config);
    return kExitOk;
  }
  const std::optional<std::string> value = config_value(config, *key);
  if (!value) {
    throw UsageError("config: --get " + *key + ": no such key in the resolved config of " +
                     args[0] + ": either not a key (hpctrain config --list names them) or one " +
                     "that does not apply to this config, such as another optimizer's " +
                     "(hpctrain config " + args[0] + " shows the keys it has)");
  }
  std::cout << *value << "\n";
  return kExitOk;
}

int dispatch(int* argc, char*** argv) {
  std::vector<std::string> args(*argv + 1, *argv + *argc);
  if (!args.empty() && args[0] == "--version") {
    std::cout << "hpctrain " << version() << " (commit " << git_commit() << "; backends: cpu"
              << (cuda_built() ? ", cuda" : "") << "; CUDA devices: " << cuda_device_count()
              << ")\nBLAS: " << blas_description()
              << "\nCUDA backend: " << cuda_backend_description() << "\n";
    return kExitOk;
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    (args.empty() ? std::cerr : std::cout) << kUsage;  // a usage error goes to stderr
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (is_python_tool(command)) exec_python_tool(command, args);  // argparse reads both forms
  OptionWords read = read_option_words(args);
  if (read.help) {  // every command prints its usage for "--help" alone; bench keeps its word
    const bool sub = command == "bench" && !args.empty() && args[0].rfind('-', 0) != 0;
    read.words =
        sub ? std::vector<std::string>{args[0], "--help"} : std::vector<std::string>{"--help"};
  }
  args = std::move(read.words);
  if (command == "train") return cmd_train(argc, argv, args);
  if (command == "eval") return cmd_eval(argc, argv, args);
  if (command == "inspect") return cmd_inspect(args);
  if (command == "generate") return cmd_generate(args);
  if (command == "export") return cmd_export(args);
  if (command == "config") return cmd_config(args);
  if (command == "init") return cmd_init(args);
  if (command == "bench") return cmd_bench(argc, argv, args);
  throw UsageError("unknown command '" + command + "' (see hpctrain --help)");
}

}  // namespace
}  // namespace hpctrain

int main(int argc, char** argv) {
  hpctrain::h5_no_cleanup_at_exit();
  hpctrain::install_crash_notes();
  // A closed stdout (a log pipe whose reader died, `| head`) fails the writes to it instead
  // of killing the process with SIGPIPE, half-way into a checkpoint or an output file.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return hpctrain::ending_code(hpctrain::dispatch(&argc, &argv));
  } catch (const hpctrain::UsageError& e) {
    // A bad command line, before MPI started, reaches every rank alike: launcher rank 0
    // says so. Later errors may be one rank's own: each rank says its own.
    int mpi_started = 0;
    MPI_Initialized(&mpi_started);
    if (mpi_started != 0 || hpctrain::prints_for_all_ranks()) hpctrain::log_error(e.what());
    hpctrain::exit_after_error(e.exit_code());
  } catch (const hpctrain::Error& e) {
    hpctrain::log_error(e.what());
    hpctrain::exit_after_error(e.exit_code());
  } catch (const std::exception& e) {
    hpctrain::log_error(e.what());
    hpctrain::exit_after_error(hpctrain::kExitFailure);
  }
}
