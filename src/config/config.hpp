// The validated run configuration: plain structs filled from a YAML file plus
// `--set key.path=value` overrides. Every key a user can write is a field here;
// config_loader.cpp maps keys to fields and reports errors as FILE:LINE: key: what.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

enum class Device { kAuto, kCpu, kCuda };
// fp32: float32 throughout. tf32: float32 data, GPU tensor cores rounding the operands of
// matrix products and convolutions to a 10-bit mantissa (the CPU computes fp32). bf16 /
// fp16: mixed precision, activations and the weights' compute copy in bfloat16 / float16,
// float32 master weights, gradients and optimizer state; fp16 adds dynamic loss scaling.
enum class Precision { kFp32, kTf32, kBf16, kFp16 };
// How a GPU stores activations with channels: nchw, or nhwc (channels last, the layout
// of cuDNN's fastest 16-bit convolutions; bf16 and fp16 only). auto: nhwc for bf16 and
// fp16 on a GPU, else nchw. The CPU computes in NCHW.
enum class Layout { kAuto, kNchw, kNhwc };
enum class Strategy { kAllreduce, kAverage };
// Gradient all-reduce: auto = nccl when the backend has device collectives and no two
// ranks share a GPU, else ring.
enum class AllreduceAlgorithm { kAuto, kRing, kMpi, kNccl };
enum class ScheduleType { kConstant, kStep, kCosine };

struct RunConfig {
  std::string name = "run";
  std::string dir;  // empty in the file means "runs/<name>"; resolved by the loader
  uint64_t seed = 1;
  bool deterministic = false;
  int threads = 0;  // compute threads per rank; 0 = node's cores / ranks on the node
};

struct DataConfig {
  std::string train;  // paths are relative to the working directory
  std::string val;    // optional: empty = no validation phase
  std::string test;   // optional: empty = no test phase
  int prefetch_threads = 2;
  int prefetch_depth = 4;  // batches buffered ahead
  bool shuffle = true;
};

// One entry of model.layers (a user-defined sequential model).
// Keys a type does not take keep their defaults; the loader rejects them in the file.
struct LayerSpec {
  // dense | relu | conv2d | maxpool | avgpool | global_avgpool | flatten | batchnorm |
  // dropout | basic_block
  std::string type{};
  std::string name{};  // optional; defaults to type + index
  int units = 0;       // dense only
  int filters = 0;     // conv2d, basic_block: output channels
  int kernel = 0;      // conv2d, maxpool, avgpool: square window size
  int stride = 1;      // conv2d, basic_block (default 1), maxpool and avgpool (default: kernel)
  int padding = 0;     // conv2d, maxpool, avgpool: zeros on each side
  bool bias = true;    // conv2d
  double rate = 0.5;   // dropout: probability of zeroing an element
};

struct ModelConfig {
  // "mlp", "cnn" (fixed small conv net), "resnet18", "resnet34" or "layers"
  std::string preset = "mlp";
  std::vector<int> hidden = {192};  // mlp: hidden layer widths
  int width = 64;                   // resnet*: channels of the first stage (doubling per stage)
  // resnet*: "imagenet" (7x7 stride-2 convolution + 3x3 stride-2 max pooling), "small"
  // (3x3 stride-1 convolution, for images of a few dozen pixels), or "auto": small when
  // the input is under 64 pixels on its shorter side.
  std::string stem = "auto";
  std::vector<LayerSpec> layers;    // preset "layers": the sequence before the classifier
  std::string init_from;            // checkpoint whose parameters start the run (fine-tuning)
  std::vector<std::string> freeze;  // layer names whose parameters stay fixed
  // The loader rejects a non-empty list meant for the other preset, and empties `hidden`
  // when preset is "layers", so the resolved config holds only what the model uses.
};

struct ScheduleConfig {
  ScheduleType type = ScheduleType::kConstant;
  double warmup_epochs = 0.0;  // linear warm-up from 0 to lr
  int step_epochs = 30;        // step: decay every this many epochs
  double gamma = 0.1;          // step: decay factor
  double min_lr = 0.0;         // cosine: floor
};

struct OptimizerConfig {
  std::string name = "sgd";  // sgd, adam or adamw
  double lr = 0.05;
  double momentum = 0.9;  // sgd
  bool nesterov = false;  // sgd
  double beta1 = 0.9;     // adam, adamw
  double beta2 = 0.999;   // adam, adamw
  double eps = 1e-8;      // adam, adamw
  // sgd and adam: added to the gradient (L2); adamw: decoupled, p *= 1 - lr * weight_decay
  double weight_decay = 0.0;
  ScheduleConfig schedule;
};

struct TrainConfig {
  int epochs = 5;
  int batch_size = 64;            // per rank
  int val_every = 1;              // validate every N epochs (and after the last)
  double progress_seconds = 5.0;  // rank 0 prints progress at most this often
  // Time each step's phases on the backend's clock (summary.json "step_phases_s"); costs
  // a few tiny kernel launches per step on a GPU.
  bool step_timing = false;
  // precision fp16: the dynamic loss scale's start (PyTorch GradScaler's defaults) and the
  // overflow-free steps after which it doubles.
  struct LossScale {
    double initial = 65536.0;
    int growth_interval = 2000;
  } loss_scale;
};

struct DistributedConfig {
  Strategy strategy = Strategy::kAllreduce;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  int every = 8;                       // average: steps between parameter averages
  int64_t ring_chunk_bytes = 1 << 20;  // ring: pipelining unit of each segment
  // nccl: gradients are summed in buckets of this size, each as soon as backward has
  // written it, overlapping the rest of backward
  int64_t bucket_bytes = 25 << 20;
  double timeout_seconds = 600.0;  // watchdog: abort if one collective takes longer; 0 = off
};

struct CheckpointConfig {
  std::string dir;             // empty in the file means "<run.dir>/checkpoints"
  int64_t every_steps = 0;     // 0 = not by step count
  double every_seconds = 0.0;  // 0 = not by time
  bool at_epoch_end = false;
  int keep = 3;  // newest complete checkpoints kept
};

struct Config {
  std::string source_file;  // the YAML file it was read from
  RunConfig run;
  Device device = Device::kAuto;
  Precision precision = Precision::kFp32;
  Layout layout = Layout::kAuto;
  DataConfig data;
  ModelConfig model;
  OptimizerConfig optimizer;
  TrainConfig train;
  DistributedConfig distributed;
  CheckpointConfig checkpoint;
};

// Reads `path`, applies `overrides` ("a.b=c", YAML scalars or flow sequences like
// "[64,32]") in order, validates, and resolves defaults. Throws UsageError with
// "FILE:LINE: key: what was expected" (or "--set key: ..." for an override).
Config load_config(const std::string& path, const std::vector<std::string>& overrides);

// The resolved config as YAML (every key, defaults included); loads back to an
// equal Config.
std::string config_to_yaml(const Config& config);

const char* to_string(Device d);
const char* to_string(Precision p);
const char* to_string(Layout l);
const char* to_string(Strategy s);
const char* to_string(AllreduceAlgorithm a);
const char* to_string(ScheduleType t);

}  // namespace hpctrain
