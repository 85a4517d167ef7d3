// The validated run configuration: plain structs filled from a YAML file plus
// `--set key.path=value` overrides. Every key a user can write is declared once, in
// config/keys.def (its type, default, range and help text); the structs below are
// generated from those declarations, and so are the reader and its checks
// (config_loader.cpp), the resolved config.yaml (config_emit.cpp) and the reference
// (`hpctrain config --list`, docs/config.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/layer_spec.hpp"

namespace hpctrain {

enum class Device { kAuto, kCpu, kCuda };
enum class Precision { kFp32, kTf32, kBf16, kFp16 };
enum class Layout { kAuto, kNchw, kNhwc };
enum class RnnEngine { kAuto, kCudnn, kSteps };
enum class AllreduceAlgorithm { kAuto, kRing, kMpi, kNccl };
enum class ScheduleType { kConstant, kStep, kCosine };

// The YAML names of the enums' values (also what to_string returns).
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
inline constexpr EnumName<RnnEngine> kRnnEngineNames[] = {
    {"auto", RnnEngine::kAuto}, {"cudnn", RnnEngine::kCudnn}, {"steps", RnnEngine::kSteps}};
inline constexpr EnumName<AllreduceAlgorithm> kAlgorithmNames[] = {
    {"auto", AllreduceAlgorithm::kAuto},
    {"ring", AllreduceAlgorithm::kRing},
    {"mpi", AllreduceAlgorithm::kMpi},
    {"nccl", AllreduceAlgorithm::kNccl}};
inline constexpr EnumName<ScheduleType> kScheduleNames[] = {{"constant", ScheduleType::kConstant},
                                                            {"step", ScheduleType::kStep},
                                                            {"cosine", ScheduleType::kCosine}};

// The name table of an enum, found by overload: enum_names(Device{}) is kDeviceNames.
constexpr const auto& enum_names(Device) { return kDeviceNames; }
constexpr const auto& enum_names(Precision) { return kPrecisionNames; }
constexpr const auto& enum_names(Layout) { return kLayoutNames; }
constexpr const auto& enum_names(RnnEngine) { return kRnnEngineNames; }
constexpr const auto& enum_names(AllreduceAlgorithm) { return kAlgorithmNames; }
constexpr const auto& enum_names(ScheduleType) { return kScheduleNames; }

struct Catalog;

// The value types of keys that are lists.
using IntList = std::vector<int>;
using NumberList = std::vector<double>;
using NameList = std::vector<std::string>;
using LayerList = std::vector<LayerSpec>;

// One struct per section of keys.def: a field per key with its default.
#define HT_SECTION(Struct, help) struct Struct {
#define HT_KEY(Type, name, default_value, rule, help) Type name = default_value;
#define HT_SUBSECTION(Struct, name) Struct name;
#define HT_END_SECTION(Struct) \
  }                            \
  ;
#include "config/keys.def"
#undef HT_SECTION
#undef HT_KEY
#undef HT_SUBSECTION
#undef HT_END_SECTION

// The whole configuration: the keys, and the file they came from.
struct Config : ConfigKeys {
  std::string source_file;  // the YAML file it was read from
};

// Reads `path`, applies `overrides` ("a.b=c", YAML scalars or flow sequences like
// "[64,32]") in order, validates against the declarations and `catalog` (the layer types
// and exchange strategies other modules define; train/catalog.hpp), and resolves defaults.
// Throws UsageError with "FILE:LINE: key: what was expected" (or "--set key: ..." for an
// override).
Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const Catalog& catalog);
// The same from YAML text (the config a checkpoint stores); errors name `source`.
Config load_config_text(const std::string& yaml, const std::string& source,
                        const std::vector<std::string>& overrides, const Catalog& catalog);

// The resolved config as YAML (every key that applies, defaults included); loads back to an
// equal Config.
std::string config_to_yaml(const Config& config);
// The first key whose line differs between two config_to_yaml texts, as "train.epochs: 2
// against 3" (a's value first; "(none)" where one text has no such line); "" if they agree
// but for comments.
std::string config_first_difference(const std::string& a, const std::string& b);
// The value of the dotted key `path` ("run.dir") in config_to_yaml's text: a scalar's text,
// a list or section in YAML flow style; nullopt where that text has no such key.
std::optional<std::string> config_value(const Config& config, const std::string& path);

const char* to_string(Device d);
const char* to_string(Precision p);
const char* to_string(Layout l);
const char* to_string(RnnEngine e);
const char* to_string(AllreduceAlgorithm a);
const char* to_string(ScheduleType t);

}  // namespace hpctrain
