// The config schema as data: which keys each section accepts, the names of enum values,
// and the "did you mean" suggestion for a misspelt key. Shared by the loader (validation and
// --set paths) and the emitter (enum names), so the two cannot disagree.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "config/config.hpp"

namespace hpctrain::config_schema {

// Schema name of the entries of model.layers; they are checked like a section.
inline constexpr std::string_view kLayerEntry = "model.layers[]";

// The keys accepted in section `section` ("" is the top level, "optimizer.schedule" a nested
// one), in the order the emitter writes them; null when `section` is not a section.
const std::vector<std::string_view>* section_keys(std::string_view section);

// True when `path` (e.g. "optimizer.schedule") names a section rather than a value.
bool is_section(std::string_view path);

// "unknown key" plus, when one is close, " (did you mean 'momentum'?)": a key of the same
// section within a small edit distance, or else the one section elsewhere holding exactly
// this key ('optimizer.lr' for train.lr).
std::string unknown_key_message(std::string_view section, std::string_view key);

// Optimal-string-alignment distance (a transposition counts as one edit), ASCII
// case-insensitive.
std::size_t edit_distance(std::string_view a, std::string_view b);

template <typename E>
struct EnumName {
  const char* name;
  E value;
};

inline constexpr EnumName<Device> kDeviceNames[] = {
    {"auto", Device::kAuto}, {"cpu", Device::kCpu}, {"cuda", Device::kCuda}};
inline constexpr EnumName<Precision> kPrecisionNames[] = {{"fp32", Precision::kFp32},
                                                          {"tf32", Precision::kTf32},
                                                          {"bf16", Precision::kBf16},
                                                          {"fp16", Precision::kFp16}};
inline constexpr EnumName<Layout> kLayoutNames[] = {
    {"auto", Layout::kAuto}, {"nchw", Layout::kNchw}, {"nhwc", Layout::kNhwc}};
inline constexpr EnumName<Strategy> kStrategyNames[] = {{"allreduce", Strategy::kAllreduce},
                                                        {"average", Strategy::kAverage}};
inline constexpr EnumName<AllreduceAlgorithm> kAlgorithmNames[] = {
    {"auto", AllreduceAlgorithm::kAuto},
    {"ring", AllreduceAlgorithm::kRing},
    {"mpi", AllreduceAlgorithm::kMpi},
    {"nccl", AllreduceAlgorithm::kNccl}};
inline constexpr EnumName<ScheduleType> kScheduleNames[] = {{"constant", ScheduleType::kConstant},
                                                            {"step", ScheduleType::kStep},
                                                            {"cosine", ScheduleType::kCosine}};

// The string-typed choices: kept as strings in Config because later modules grow them.
inline constexpr const char* kPresetNames[] = {"mlp", "cnn", "resnet18", "resnet34", "layers"};
inline constexpr const char* kStemNames[] = {"auto", "imagenet", "small"};
inline constexpr const char* kOptimizerNames[] = {"sgd", "adam", "adamw"};
inline constexpr const char* kLayerTypeNames[] = {
    "dense",          "relu",    "conv2d",    "maxpool", "avgpool",
    "global_avgpool", "flatten", "batchnorm", "dropout", "basic_block"};

// The keys of model.layers[] a layer type takes besides type and name, in the order the
// emitter writes them; the first `required` of them must be given.
struct LayerKeys {
  std::string_view type;
  std::vector<std::string_view> keys;
  std::size_t required;
  bool takes(std::string_view key) const;
};

// The entry for a name of kLayerTypeNames; null for any other string.
const LayerKeys* layer_keys(std::string_view type);

// The layer types taking `key`, for an error message: "dense", "conv2d, maxpool or avgpool".
std::string layer_types_taking(std::string_view key);

// "allreduce, average": the list an error message offers.
template <typename T, std::size_t N>
std::string join_names(const T (&names)[N]) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    if constexpr (std::is_same_v<T, const char*>) {
      out += n;
    } else {
      out += n.name;
    }
  }
  return out;
}

}  // namespace hpctrain::config_schema
