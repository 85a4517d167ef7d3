// hpctrain export (export_model.hpp). The model is built as eval and generate build it (one
// CPU thread, no MPI), its checkpoint loaded, and every tensor named by nn/layer_tensors;
// the reference inputs are the first rows of the data as the loader decodes them, and the
// reference logits hpctrain's forward pass over them in evaluation mode, so that whoever
// reads the file can check a model of their own against hpctrain's. PyTorch and ONNX files
// need PyTorch, which C++ cannot write without libtorch: the Python tools convert an
// hdf5-layers file written to a temporary file first.
#include "apps/export_model.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "apps/model_target.hpp"
#include "backend/cpu_backend.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/installation.hpp"
#include "core/option_words.hpp"
#include "core/version.hpp"
#include "data/dataset_files.hpp"
#include "h5/h5.hpp"
#include "nn/layer_tensors.hpp"
#include "nn/model.hpp"
#include "train/input_preprocess.hpp"

extern char** environ;

namespace hpctrain {
namespace {

constexpr const char* kExportUsage =
    "usage: hpctrain export TARGET --format hdf5-layers|pytorch|onnx --out FILE [--force]\n"
    "                       [--checkpoint PATH] [--set key.path=value]...\n"
    "\n"
    "Writes the trained model for use outside hpctrain (docs/export.md). TARGET is a run\n"
    "directory, a checkpoint or a config, as for eval; --checkpoint PATH takes that\n"
    "checkpoint instead.\n"
    "  hdf5-layers  an HDF5 file: one float32 dataset per tensor under PyTorch's state_dict\n"
    "               names, the architecture, the input preprocessing, and 8 reference\n"
    "               inputs with hpctrain's logits for them\n"
    "  pytorch      torch.save() of the state_dict of hpctrain_tools.torch_models' module\n"
    "  onnx         an ONNX model (feed-forward models)\n"
    "pytorch and onnx need python3-torch; the module's logits must match hpctrain's within\n"
    "1e-5. An existing FILE is refused unless --force. Runs on one CPU core, without MPI.\n";

constexpr const char* kFormatName = "hpctrain-layers";
constexpr int64_t kFormatVersion = 1;
constexpr int64_t kReferenceRows = 8;

struct Options {
  TargetArgs target;
  std::string format, out;
  bool force = false;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    if (take_target_arg(args, i, o.target, "export")) continue;
    const bool has_value = i + 1 < args.size();
    const std::string& a = args[i];
    if (a == "--format" && has_value) {
      o.format = args[++i];
    } else if (a == "--out" && has_value) {
      o.out = args[++i];
    } else if (a == "--force") {
      o.force = true;
    } else {
      throw UsageError("export: unknown or incomplete option '" + a + "' (see --help)");
    }
  }
  if (o.target.target.empty()) {
    throw UsageError("export: expected a run directory, a checkpoint or a config (see --help)");
  }
  if (o.format.empty()) throw UsageError("export: --format F is required (see --help)");
  if (o.format != "hdf5-layers" && o.format != "pytorch" && o.format != "onnx") {
    throw UsageError("export: --format: expected hdf5-layers, pytorch or onnx, got '" + o.format +
                     "'");
  }
  if (o.out.empty()) throw UsageError("export: --out FILE is required (see --help)");
  std::error_code ec;
  if (std::filesystem::is_directory(o.out, ec)) {
    throw UsageError(o.out + ": --out is a directory; name the file to write");
  }
  if (std::filesystem::symlink_status(o.out, ec).type() != std::filesystem::file_type::not_found &&
      !o.force) {
    throw UsageError(o.out + ": exists (--force replaces it)");
  }
  const std::filesystem::path dir = std::filesystem::absolute(o.out, ec).parent_path();
  if (!std::filesystem::is_directory(dir, ec)) {
    throw UsageError(o.out + ": --out: no directory " + dir.string());
  }
  return o;
}

// What a user of the exported model must do to an input sample, by the stored type of the
// data (core/sample_type.hpp does the same for hpctrain).
// Without data.normalize (`normalized` false) nothing else is done.
std::string preprocessing(SampleType type, bool normalized) {
  const std::string then =
      normalized ? "; then, per channel c, x becomes (x - float32(input_mean[c])) * "
                   "float32(1 / input_std[c]) (data.normalize; torchvision's Normalize "
                   "divides instead: equal to within a unit in the last place)"
                 : "; no mean or standard deviation is subtracted";
  switch (type) {
    case SampleType::kU8:
      return "uint8 pixels v, channels first [N, C, H, W], become float32 v * float32(1/255) in "
             "[0, 1] (torchvision's ToTensor(), which divides by 255: equal to within one unit "
             "in the last place)" +
             then;
    case SampleType::kF16:
      return "float16 values, channels first [N, C, H, W], converted exactly to float32" + then;
    case SampleType::kF32:
      return "float32 values, channels first [N, C, H, W], used as stored" + then;
    case SampleType::kToken:
      return "token ids in [0, vocab_size) as float32 values, [N, 1, 1, T]: the first T ids of "
             "each row of /tokens";
  }
  return "";
}

// The first rows of the test set, else the validation set, else the training set, decoded
// to float32 and normalised as the loader does it for evaluation.
struct Reference {
  std::string source;
  int64_t rows = 0;
  std::vector<float> inputs;
};

Reference read_reference(const Config& config, const DatasetShape& train,
                         const Preprocess& preprocess) {
  const std::pair<const NameList*, const char*> sets[] = {
      {&config.data.test, "test"}, {&config.data.val, "val"}, {&config.data.train, "train"}};
  for (const auto& [entries, key] : sets) {
    const std::unique_ptr<DataSource> data =
        open_data(expand_data_paths(*entries, config.source_file + ": data." + std::string(key)));
    if (data == nullptr || data->shape().n == 0) continue;
    const DatasetShape& s = data->shape();
    // As eval checks it: another shape was read past the end of its buffer.
    if (std::string_view(key) != "train") check_like_training(s, train, data->path(), key);
    Reference r;
    r.source = data->path();
    r.rows = std::min(kReferenceRows, s.n);
    std::vector<std::byte> raw(static_cast<size_t>(r.rows) * s.sample_bytes());
    std::vector<int32_t> labels(static_cast<size_t>(r.rows * s.labels_per_sample));
    data->read_rows(0, r.rows, raw.data(), labels.data());
    r.inputs.resize(static_cast<size_t>(r.rows * s.sample_elems()));
    decode_samples(raw.data(), s.type, r.inputs.size(), r.inputs.data());
    for (int64_t i = 0; i < r.rows; ++i) {
      preprocess.normalize(r.inputs.data() + i * s.sample_elems(), s.h * s.w);
    }
    return r;
  }
  throw UsageError(config.source_file + ": data.train: no rows to take reference inputs from");
}

// A float32 dataset of `shape` holding `values`; returned open for its attributes.
H5Handle write_floats(hid_t loc, const std::string& name, const Dims& shape, const float* values) {
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  H5Handle space(HT_CHECK_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)),
                 H5Sclose);
  H5Handle set(HT_CHECK_H5(H5Dcreate2(loc, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                      H5P_DEFAULT, H5P_DEFAULT)),
               H5Dclose);
  HT_CHECK_H5(H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values));
  return set;
}

// Everything the file holds, gathered before it is written.
struct Export {
  Config config;
  std::string checkpoint;
  int64_t step = 0;
  DatasetShape shape;     // of data.train
  Preprocess preprocess;  // the normalisation applies to the model's inputs
  std::string architecture;
  Dims output_dims;
  std::vector<LayerTensor> tensors;
  std::vector<float> params, state;
  Reference reference;
  std::vector<float> logits;
};

void write_layers_hdf5(OwnedTemporary& temp, const Export& e) {
  const H5Handle fapl = h5_large_attribute_access();  // a vocabulary, tensor names
  H5Handle file(HT_CHECK_H5(H5Fcreate(temp.path().c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get())),
                H5Fclose);
  temp.own(h5_descriptor(file.get()));
  const hid_t root = file.get();
  const DatasetShape& s = e.shape;
  h5_write_strings(root, "format", {kFormatName}, true);
  h5_write_int(root, "format_version", kFormatVersion);
  h5_write_strings(root, "preset", {e.config.model.preset}, true);
  h5_write_strings(root, "architecture", {e.architecture}, true);
  h5_write_strings(root, "config_yaml", {config_to_yaml(e.config)}, true);
  h5_write_ints(root, "input_shape", {s.c, s.h, s.w});
  h5_write_strings(root, "input_type", {to_string(s.type)}, true);
  h5_write_double(root, "input_scale", s.type == SampleType::kU8 ? kU8Scale : 1.0);
  if (!e.preprocess.mean.empty()) {
    std::vector<double> mean, std;
    for (size_t ch = 0; ch < e.preprocess.mean.size(); ++ch) {
      mean.push_back(e.preprocess.mean[ch]);
      std.push_back(1.0 / static_cast<double>(e.preprocess.inv_std[ch]));
    }
    h5_write_doubles(root, "input_mean", mean);
    h5_write_doubles(root, "input_std", std);
  }
  h5_write_strings(root, "input_preprocessing", {preprocessing(s.type, !e.preprocess.mean.empty())},
                   true);
  h5_write_int(root, "num_classes", s.num_classes);
  h5_write_ints(root, "output_shape", e.output_dims);
  if (!s.class_names.empty()) h5_write_strings(root, "class_names", s.class_names, false);
  if (!s.vocabulary.empty()) h5_write_strings(root, "vocabulary", s.vocabulary, false);
  h5_write_strings(root, "checkpoint", {e.checkpoint}, true);
  h5_write_int(root, "step", e.step);
  h5_write_strings(root, "hpctrain_version", {version()}, true);
  std::vector<std::string> names;
  for (const LayerTensor& t : e.tensors) names.push_back(t.name);
  h5_write_strings(root, "tensor_names", names, false);

  H5Handle dict(HT_CHECK_H5(H5Gcreate2(root, "state_dict", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)),
                H5Gclose);
  for (const LayerTensor& t : e.tensors) {
    const float* values = (t.state ? e.state : e.params).data() + t.offset;
    H5Handle set = write_floats(dict.get(), t.name, t.shape, values);
    h5_write_strings(set.get(), "layer", {t.layer}, true);
    h5_write_strings(set.get(), "array", {t.state ? "model/state" : "model/params"}, true);
    h5_write_int(set.get(), "offset", static_cast<int64_t>(t.offset));
  }

  H5Handle ref(HT_CHECK_H5(H5Gcreate2(root, "reference", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)),
               H5Gclose);
  h5_write_strings(ref.get(), "source", {e.reference.source}, true);
  const int64_t n = e.reference.rows;
  write_floats(ref.get(), "inputs", {n, s.c, s.h, s.w}, e.reference.inputs.data());
  Dims logits_shape = {n};
  logits_shape.insert(logits_shape.end(), e.output_dims.begin(), e.output_dims.end());
  write_floats(ref.get(), "logits", logits_shape, e.logits.data());
  HT_CHECK_H5(H5Fflush(root, H5F_SCOPE_GLOBAL));
}

// Writes `path` through path.tmp, renamed when complete.
void write_layers_file(const std::string& path, const Export& e) {
  h5_quiet();
  OwnedTemporary temp(path + ".tmp", path);  // removed if anything fails
  try {
    write_layers_hdf5(temp, e);
  } catch (const Error& err) {
    throw Error(path + ": cannot write: " + err.what());
  }
  temp.commit();
}

Export gather(const Options& o) {
  ModelTarget target = resolve_model_target(o.target);
  const LoadedCheckpoint checkpoint = read_target_checkpoint(target, "export");
  // --force replaces an earlier export, never what this one reads (the data files too: a
  // test set was replaced by the export).
  std::vector<std::string> inputs = {checkpoint.path, target.config.source_file};
  const DataConfig& d = target.config.data;
  for (const auto& [entries, key] :
       {std::pair{&d.train, "train"}, std::pair{&d.val, "val"}, std::pair{&d.test, "test"}}) {
    for (const std::string& path :
         expand_data_paths(*entries, target.config.source_file + ": data." + key)) {
      inputs.push_back(path);
    }
  }
  std::error_code ec;
  for (const std::string& input : inputs) {
    if (std::filesystem::equivalent(o.out, input, ec)) {
      throw UsageError(o.out + ": --out is " + input + ", which the export reads");
    }
  }
  Export e;
  e.config = std::move(target.config);
  const Config& config = e.config;
  const std::unique_ptr<DataSource> train = open_training_data(config);
  e.checkpoint = checkpoint.path;
  e.step = checkpoint.state.step;
  e.shape = train->shape();
  e.preprocess = input_preprocess(config, *train);
  e.reference = read_reference(config, e.shape, e.preprocess);

  CpuBackend backend(1);
  const std::unique_ptr<Model> model_ptr =
      load_checkpoint_model(backend, config, e.shape, e.reference.rows, checkpoint);
  Model& model = *model_ptr;
  e.architecture = model.architecture();
  e.output_dims = model.output_dims();
  e.tensors = layer_tensors(model, config.model.preset);
  for (const LayerTensor& t : e.tensors) {
    if (t.name.find('/') != std::string::npos) {
      throw UsageError(config.source_file + ": model.layers: layer '" + t.layer +
                       "': a name with '/' cannot name an HDF5 dataset");
    }
  }
  e.params.resize(model.param_count());
  e.state.resize(model.state_count());
  model.get_params(e.params.data());
  model.get_state(e.state.data());

  const Tensor& out = model.forward(e.reference.inputs.data(), e.reference.rows, false);
  e.logits.resize(static_cast<size_t>(out.elems()));
  backend.copy_to_host(e.logits.data(), out.data, e.logits.size() * sizeof(float));
  return e;
}

// The python3 that run_python_export waits for, to which its handler passes a signal on.
volatile sig_atomic_t g_python_child = 0;

extern "C" void pass_signal_to_python(int sig) {
  if (g_python_child > 0) kill(static_cast<pid_t>(g_python_child), sig);
}

// Runs `python3 -m hpctrain_tools export` on the hdf5-layers file `layers` and returns its
// exit code. SIGTERM, SIGINT or SIGHUP sent to hpctrain alone (a batch system's, a parent's)
// is passed on to python3, so that the export ends with it instead of writing on without a
// parent; the signals are held from before the spawn until the handler is in place.
int run_python_export(const std::string& layers, const Options& o) {
  const std::filesystem::path dir = share_dir("python/hpctrain_tools/__main__.py") / "python";
  const char* old = std::getenv("PYTHONPATH");
  std::string path = dir.string();
  if (old != nullptr && *old != '\0') path += std::string(":") + old;
  setenv("PYTHONPATH", path.c_str(), 1);
  // Each value joined to its option: argparse takes a word that starts with '-' for one.
  std::vector<std::string> words = {"python3",
                                    "-m",
                                    "hpctrain_tools",
                                    "export",
                                    "--layers=" + layers,
                                    "--format=" + o.format,
                                    "--out=" + o.out};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int passed[] = {SIGTERM, SIGINT, SIGHUP};
  sigset_t held, before, none;
  sigemptyset(&held);
  sigemptyset(&none);
  for (int sig : passed) sigaddset(&held, sig);
  pthread_sigmask(SIG_BLOCK, &held, &before);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &none);  // python3 starts with the signals open
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, "python3", nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    throw UsageError("export: cannot start python3 (" + std::string(std::strerror(err)) +
                     "): --format " + o.format +
                     " needs python3 with python3-torch; --format hdf5-layers does not");
  }
  g_python_child = pid;
  struct sigaction pass {};
  pass.sa_handler = pass_signal_to_python;
  sigemptyset(&pass.sa_mask);
  struct sigaction old_actions[std::size(passed)];
  for (size_t i = 0; i < std::size(passed); ++i) sigaction(passed[i], &pass, &old_actions[i]);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  int status = 0;
  int wait_error = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      wait_error = errno;
      break;
    }
  }
  for (size_t i = 0; i < std::size(passed); ++i) sigaction(passed[i], &old_actions[i], nullptr);
  g_python_child = 0;
  if (wait_error != 0) {
    throw Error(std::string("export: waiting for python3: ") + std::strerror(wait_error));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  throw Error("export: python3 ended by signal " + std::to_string(WTERMSIG(status)));
}

}  // namespace

int cmd_export(const std::vector<std::string>& args) {
  if (is_help(args)) {
    std::cout << kExportUsage;
    return kExitOk;
  }
  const Options o = parse(args);
  const Export e = gather(o);
  if (o.format == "hdf5-layers") {
    write_layers_file(o.out, e);
    std::cout << "wrote " << o.out << " (" << e.tensors.size() << " tensors from " << e.checkpoint
              << ")\n";
    return kExitOk;
  }
  h5_quiet();
  // Beside OUT, not in TMPDIR: an export killed by a signal leaves it where it is seen, and
  // the next export to OUT takes it over (and removes it).
  OwnedTemporary temp(o.out + ".layers.tmp", o.out);  // removed at the end
  write_layers_hdf5(temp, e);
  return run_python_export(temp.path(), o);
}

}  // namespace hpctrain
