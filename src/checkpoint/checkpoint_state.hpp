// Everything a checkpoint holds, in host memory: the training cursor, the facts
// that must match on resume, and named float32 arrays. New kinds of state
// (BatchNorm statistics, a loss scaler, parameter-server slices) are new array
// names or attributes; readers ignore names they do not know, so older
// checkpoints stay loadable and the format version changes only when a
// meaning changes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain {

// Well-known array names. With strategy `average` the ranks' parameters differ,
// and each rank's arrays are stored under rank_array_name(r, ...).
inline constexpr const char* kParamsArray = "model/params";
// Model state (BatchNorm running statistics): averaged over the ranks before a save, so
// always one shared array.
inline constexpr const char* kStateArray = "model/state";
// Optimizer state (optim/optimizer.hpp): SGD's momentum; Adam's moments, and its step
// counter (one value, the same on every rank).
inline constexpr const char* kVelocityArray = "optimizer/velocity";
inline constexpr const char* kAdamFirstMomentArray = "optimizer/adam_m";
inline constexpr const char* kAdamSecondMomentArray = "optimizer/adam_v";
inline constexpr const char* kAdamStepArray = "optimizer/adam_step";
// The float16 loss scaler: {scale, steps since the last overflow or growth}. Identical on
// every rank (strategy allreduce only).
inline constexpr const char* kLossScaleArray = "optimizer/loss_scale";
std::string rank_array_name(int rank, const std::string& name);
// The same name written into `out`, whose memory is reused (no allocation once it holds one).
void rank_array_name(int rank, std::string_view name, std::string& out);

struct CheckpointState {
  // 2: the file ends in a whole-file checksum (checkpoint_footer.hpp); 1: it does not.
  static constexpr int kFormatVersion = 2;
  int format_version = kFormatVersion;
  int64_t step = 0;             // global optimizer steps completed
  int64_t epoch = 0;            // 0-based epoch the next step belongs to
  int64_t step_in_epoch = 0;    // steps of that epoch already done
  int64_t steps_per_epoch = 0;  // at the world size that wrote it
  int64_t global_batch = 0;
  int world_size = 1;
  std::string strategy;      // "allreduce" or "average"
  std::string config_yaml;   // the resolved config of the run that wrote it
  std::string architecture;  // model and data shapes, one line per item
  std::string created;       // UTC time, ISO 8601
  std::map<std::string, std::vector<float>, std::less<>> arrays;

  // arrays[name], looked up without making a string of `name`: a recycled state that has
  // the array already allocates nothing.
  std::vector<float>& array(std::string_view name);
  size_t bytes() const;
};

// Array `name` as one copy: the shared array, or else the element-wise mean of the per-rank
// copies (rank_array_name(r, name) for r = 0, 1, ... while present), summed in double, so
// copies that agree give their value exactly (a float sum x/P + ... + x/P, or
// (x + ... + x)/P, need not). Empty without either; UsageError naming `path` when the
// copies differ in length.
std::vector<float> shared_array(const CheckpointState& s, const std::string& name,
                                const std::string& path);

}  // namespace hpctrain
