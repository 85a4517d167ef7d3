// The energy a node's devices use while a job trains: CPU package and DRAM counters of
// Linux powercap (RAPL), and each GPU's through NVML (libnvidia-ml, loaded at run time with
// dlopen, so builds and machines without it work). One sampler per node (node-local rank 0)
// reads them every energy.interval_ms on a thread of its own and appends the samples to a
// CSV file (docs/contracts.md, "power.csv"). A source that cannot be read has no total,
// only the reason, never a zero.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hpctrain {

// The increase of a counter that counts from 0 to max_range and then starts again at 0,
// between two readings at most one wrap apart; none where a decrease cannot be one wrap
// (no range, or more than half the range in one interval: the counter was reset).
std::optional<uint64_t> counter_delta(uint64_t previous, uint64_t current, uint64_t max_range);

// A source's energy since sampling started, or why there is none.
struct EnergySource {
  std::optional<double> joules;
  std::string reason;  // when joules is empty
};

// RAPL domains under a powercap root (/sys/class/powercap, where every zone and sub-zone is
// a link of its own at the top level; the zones' own links lead back up, so the tree is not
// walked): packages (package-N) count as cpu, dram sub-domains as dram; core, uncore and
// psys are parts or supersets and are not added. A kind with a domain that cannot be read,
// at the start or later, has no total (a partial sum would pass for the whole).
class RaplCounters {
 public:
  explicit RaplCounters(const std::string& root);
  // Reads every counter and adds what each counted since the last reading.
  void sample();
  EnergySource cpu() const { return total("package"); }
  EnergySource dram() const { return total("dram"); }
  // A domain: its kind (package or dram), directory, counter range and last reading, and
  // the joules counted since construction.
  struct Domain {
    std::string kind, path;
    uint64_t max_range = 0, last = 0;
    double joules = 0;
    bool failed = false;  // a reading failed or went back: the kind has no total
  };
  const std::vector<Domain>& domains() const { return domains_; }

 private:
  EnergySource total(const std::string& kind) const;
  std::vector<Domain> domains_;
  std::string reason_;              // why a kind has no domain
  std::vector<Domain> unreadable_;  // domains whose counter could not be read at the start
};

// A GPU's PCI address (domain, bus, device), from CUDA's bus id ("0000:3B:00.0") or NVML's
// ("00000000:3B:00.0"), which write the domain with 4 and 8 digits.
struct PciAddress {
  unsigned domain = 0, bus = 0, device = 0;
  bool operator==(const PciAddress&) const = default;
};
// None where `bus_id` is not of that form.
std::optional<PciAddress> parse_pci_bus_id(const std::string& bus_id);

// NVML's energy counters (millijoules since the driver loaded) per GPU.
class NvmlEnergy {
 public:
  // Never throws: unavailable with a reason. `library`: NVML's (tests load a stand-in).
  explicit NvmlEnergy(const std::string& library = "libnvidia-ml.so.1");
  ~NvmlEnergy();
  NvmlEnergy(const NvmlEnergy&) = delete;
  NvmlEnergy& operator=(const NvmlEnergy&) = delete;

  void sample();
  EnergySource gpu() const;
  // Those of the GPUs at `used` (the node's ranks' GPUs): 0 J where none is used, none
  // where one of them cannot be read.
  EnergySource gpus_at(const std::vector<PciAddress>& used) const;
  const std::vector<double>& joules() const { return joules_; }  // per GPU, so far
  bool failed(size_t gpu) const { return failed_[gpu] != 0; }    // a reading failed

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  std::string reason_;
  std::vector<void*> devices_;
  std::vector<std::optional<PciAddress>> pci_;  // per GPU, where NVML tells it
  std::string pci_reason_;                      // why NVML tells no GPU's address
  std::vector<uint64_t> last_mj_;
  std::vector<double> joules_;
  std::vector<char> failed_;  // per GPU: a reading failed, so the sum would be partial
};

// The sources, in the order of EnergyCounts and summary.json: the CPU packages, the DRAM,
// every GPU, and the GPUs that the job's ranks use (the "active" ones; the others idle).
inline constexpr int kEnergySources = 4;
inline constexpr const char* kEnergySourceNames[kEnergySources] = {"cpu", "dram", "gpu",
                                                                   "gpu_active"};
inline constexpr int kGpuSource = 2, kGpuActiveSource = 3;

// What a node used while training; the sum over the nodes is the job's.
struct EnergyTotals {
  EnergySource cpu, dram, gpu, gpu_active;
  double seconds = 0;  // sampled
  std::array<const EnergySource*, kEnergySources> sources() const {
    return {&cpu, &dram, &gpu, &gpu_active};
  }
};

// The same as plain numbers, without the reasons, which the training thread passes around
// without allocating: per source the joules and whether they were read.
struct EnergyCounts {
  double joules[kEnergySources] = {0, 0, 0, 0};
  bool read[kEnergySources] = {false, false, false, false};
  double seconds = 0;
};
EnergyCounts counts_of(const EnergyTotals& t);

class EnergySampler {
 public:
  // Samples every `interval_s`, appending rows to `csv_path` (created with a header);
  // `active_gpus`: the bus ids of the GPUs the node's ranks use (gpu_active).
  EnergySampler(double interval_s, const std::string& csv_path, const std::string& powercap_root,
                const std::vector<std::string>& active_gpus = {},
                const std::string& nvml_library = "libnvidia-ml.so.1");
  ~EnergySampler();
  EnergySampler(const EnergySampler&) = delete;
  EnergySampler& operator=(const EnergySampler&) = delete;
  // Has the sampling thread take a sample now (a row of the CSV file, like the others) and
  // returns the counts so far; the calling thread waits but allocates nothing. After
  // finish(), its counts.
  EnergyCounts sample_now();
  // Stops sampling (one last sample first) and returns the totals.
  EnergyTotals finish();

 private:
  void loop();
  void sample_and_write(double now);
  EnergyTotals totals(double now) const;
  void append(const std::string& text);

  double interval_s_;
  std::string csv_path_;
  int fd_ = -1;      // csv_path_, written by the sampling thread, then by finish()
  NvmlEnergy nvml_;  // first: nvmlInit is not inside the window the counters measure
  RaplCounters rapl_;
  std::vector<PciAddress> active_;   // the GPUs the node's ranks use
  std::string active_reason_;        // a bus id that could not be parsed
  double start_ = 0, last_ = 0;      // the sampling thread's, then finish()'s
  std::vector<double> last_joules_;  // per CSV device, for the power column
  std::mutex mutex_;
  std::condition_variable cv_, answered_cv_;
  bool stopping_ = false;                  // GUARDED_BY mutex_
  uint64_t requested_ = 0, answered_ = 0;  // GUARDED_BY mutex_: sample_now()'s requests
  EnergyCounts latest_;                    // GUARDED_BY mutex_: of the last sample
  std::thread thread_;
};

}  // namespace hpctrain
