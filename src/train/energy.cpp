// RAPL through powercap files, NVML through dlopen, and the sampling thread.
#include "train/energy.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace hpctrain {
namespace {

bool read_u64(const std::string& path, uint64_t& value) {
  std::ifstream in(path);
  unsigned long long v = 0;
  if (!(in >> v)) return false;
  value = v;
  return true;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

std::optional<uint64_t> counter_delta(uint64_t previous, uint64_t current, uint64_t max_range) {
  if (current >= previous) return current - previous;
  if (max_range == 0 || previous > max_range) return std::nullopt;
  const uint64_t wrapped = max_range - previous + current + 1;  // past max_range to 0, once
  if (wrapped > max_range / 2) return std::nullopt;
  return wrapped;
}

RaplCounters::RaplCounters(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    reason_ = root + " does not exist (no powercap RAPL on this machine)";
    return;
  }
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const std::string dir = e.path().string();
    const std::string name = e.path().filename().string();
    if (name.rfind("intel-rapl:", 0) != 0 || !fs::exists(dir + "/energy_uj", ec)) continue;
    const std::string label = read_line(dir + "/name");
    std::string kind;
    if (label.rfind("package", 0) == 0) kind = "package";
    if (label == "dram") kind = "dram";
    if (kind.empty()) continue;
    Domain d;
    d.kind = kind;
    d.path = dir;
    if (!read_u64(dir + "/max_energy_range_uj", d.max_range) ||
        !read_u64(dir + "/energy_uj", d.last)) {
      unreadable_.push_back(d);
      continue;
    }
    domains_.push_back(d);
  }
  if (domains_.empty() && unreadable_.empty()) {
    reason_ = "no RAPL package or dram domain under " + root;
  }
}

void RaplCounters::sample() {
  for (Domain& d : domains_) {
    uint64_t now = 0;
    if (d.failed) continue;
    const std::optional<uint64_t> delta = read_u64(d.path + "/energy_uj", now)
                                              ? counter_delta(d.last, now, d.max_range)
                                              : std::nullopt;
    if (!delta) {
      d.failed = true;
      continue;
    }
    d.joules += 1e-6 * static_cast<double>(*delta);
    d.last = now;
  }
}

EnergySource RaplCounters::total(const std::string& kind) const {
  EnergySource s;
  for (const Domain& u : unreadable_) {
    if (u.kind == kind) {
      s.reason =
          u.path + "/energy_uj is not readable (only root may read RAPL counters since Linux 5.10)";
      return s;
    }
  }
  for (const Domain& d : domains_) {
    if (d.kind != kind) continue;
    if (d.failed) {
      s.joules.reset();
      s.reason = d.path +
                 "/energy_uj could not be read during the run, or went back other than by one "
                 "wrap of its range";
      return s;
    }
    s.joules = s.joules.value_or(0.0) + d.joules;
  }
  if (!s.joules) s.reason = reason_.empty() ? "no RAPL " + kind + " domain" : reason_;
  return s;
}

std::optional<PciAddress> parse_pci_bus_id(const std::string& bus_id) {
  PciAddress a;
  unsigned function = 0;
  int end = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x%n", &a.domain, &a.bus, &a.device, &function, &end) !=
          4 ||
      static_cast<size_t>(end) != bus_id.size()) {
    return std::nullopt;
  }
  return a;
}

// The NVML calls used, by their C signatures (nvml.h): 0 is NVML_SUCCESS.
struct NvmlEnergy::Api {
  void* lib = nullptr;
  int (*shutdown)() = nullptr;
  int (*energy)(void* device, unsigned long long* millijoules) = nullptr;
};

namespace {

// nvmlPciInfo_t (nvml.h).
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

}  // namespace

NvmlEnergy::NvmlEnergy(const std::string& library) : api_(std::make_unique<Api>()) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    reason_ = library + " cannot be loaded (no NVIDIA driver on this machine)";
    return;
  }
  api_->lib = lib;
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle =
      reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  api_->shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
  api_->energy = reinterpret_cast<int (*)(void*, unsigned long long*)>(
      dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
  auto pci = reinterpret_cast<int (*)(void*, NvmlPciInfo*)>(dlsym(lib, "nvmlDeviceGetPciInfo_v3"));
  if (pci == nullptr) pci_reason_ = library + " lacks nvmlDeviceGetPciInfo_v3 (an old driver)";
  if (init == nullptr || count == nullptr || handle == nullptr || api_->energy == nullptr ||
      api_->shutdown == nullptr) {
    reason_ = library + " lacks the energy calls (driver older than Volta's)";
    return;
  }
  if (init() != 0) {
    reason_ = "nvmlInit failed";
    api_->shutdown = nullptr;
    return;
  }
  unsigned n = 0;
  if (count(&n) != 0 || n == 0) {
    reason_ = "NVML sees no GPU";
    return;
  }
  // The GPUs this process may read: on a node whose devices a job's cgroup confines, NVML
  // lists every GPU but opens only the job's.
  for (unsigned i = 0; i < n; ++i) {
    void* device = nullptr;
    unsigned long long mj = 0;
    if (handle(i, &device) != 0 || api_->energy(device, &mj) != 0) continue;
    devices_.push_back(device);
    last_mj_.push_back(mj);
    NvmlPciInfo info{};
    pci_.push_back(pci != nullptr && pci(device, &info) == 0
                       ? std::optional<PciAddress>(PciAddress{info.domain, info.bus, info.device})
                       : std::nullopt);
  }
  if (devices_.empty()) {
    reason_ = "no GPU reports its energy through NVML to this process (of " + std::to_string(n) +
              " it lists)";
  }
  joules_.assign(devices_.size(), 0.0);
  failed_.assign(devices_.size(), 0);
}

NvmlEnergy::~NvmlEnergy() {
  if (api_->shutdown != nullptr) api_->shutdown();
  if (api_->lib != nullptr) dlclose(api_->lib);
}

void NvmlEnergy::sample() {
  for (size_t i = 0; i < devices_.size(); ++i) {
    unsigned long long mj = 0;
    if (failed_[i] != 0) continue;
    if (api_->energy(devices_[i], &mj) != 0) {
      failed_[i] = 1;
      continue;
    }
    // The counter never wraps (64 bits of millijoules); one that went down restarted from 0
    // (a driver reload, a GPU reset).
    joules_[i] += 1e-3 * static_cast<double>(mj >= last_mj_[i] ? mj - last_mj_[i] : mj);
    last_mj_[i] = mj;
  }
}

EnergySource NvmlEnergy::gpu() const {
  EnergySource s;
  if (devices_.empty()) {
    s.reason = reason_;
    return s;
  }
  double sum = 0;
  for (size_t i = 0; i < joules_.size(); ++i) {
    if (failed_[i] != 0) {
      s.reason = "GPU " + std::to_string(i) + "'s energy could not be read during the run";
      return s;
    }
    sum += joules_[i];
  }
  s.joules = sum;
  return s;
}

EnergySource NvmlEnergy::gpus_at(const std::vector<PciAddress>& used) const {
  EnergySource s;
  if (!used.empty() && devices_.empty()) {
    s.reason = reason_;
    return s;
  }
  double sum = 0;  // none used: 0 J, every GPU idle
  for (const PciAddress& a : used) {
    const auto it = std::find(pci_.begin(), pci_.end(), std::optional<PciAddress>(a));
    const size_t i = static_cast<size_t>(it - pci_.begin());
    if (it != pci_.end() && failed_[i] == 0) {
      sum += joules_[i];
      continue;
    }
    char name[32];
    std::snprintf(name, sizeof(name), "%04x:%02x:%02x.0", a.domain, a.bus, a.device);
    if (it == pci_.end()) {
      s.reason = !pci_reason_.empty() ? pci_reason_
                                      : std::string("the GPU at ") + name +
                                            ", which a rank uses, is not among those that report "
                                            "their energy through NVML to this process";
    } else {
      s.reason =
          std::string("the energy of the GPU at ") + name + " could not be read during the run";
    }
    return s;
  }
  s.joules = sum;
  return s;
}

EnergySampler::EnergySampler(double interval_s, const std::string& csv_path,
                             const std::string& powercap_root,
                             const std::vector<std::string>& active_gpus,
                             const std::string& nvml_library)
    : interval_s_(interval_s), csv_path_(csv_path), nvml_(nvml_library), rapl_(powercap_root) {
  for (const std::string& id : active_gpus) {  // each once (devices_on_my_node)
    if (const std::optional<PciAddress> a = parse_pci_bus_id(id)) {
      active_.push_back(*a);
    } else {
      active_reason_ = "a rank's GPU has a PCI bus id of an unknown form: " + id;
    }
  }
  // start_ right after the counters' first readings (rapl_ is built after nvml_).
  start_ = last_ = now_seconds();
  // A symbolic link at the path is replaced, never written through (what it points to is
  // not this run's); the file is opened once and appended to.
  struct stat st {};
  if (::lstat(csv_path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) ::unlink(csv_path_.c_str());
  fd_ = ::open(csv_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw Error(csv_path_ + ": cannot create the power samples file: " + std::strerror(errno));
  }
  append("time_s,device,power_w,energy_j\n");
  thread_ = std::thread([this] { loop(); });
}

EnergySampler::~EnergySampler() {
  if (thread_.joinable()) finish();
  if (fd_ >= 0) ::close(fd_);
}

void EnergySampler::append(const std::string& text) {
  // Samples are best effort: a failed write (a full disk) loses rows, not the run.
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void EnergySampler::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // Every interval, and at once when sample_now() asks.
    cv_.wait_for(lock, std::chrono::duration<double>(interval_s_),
                 [this] { return stopping_ || requested_ != answered_; });
    if (stopping_) return;
    const uint64_t request = requested_;
    const bool asked = request != answered_;
    lock.unlock();
    const double now = now_seconds();
    sample_and_write(now);
    if (!asked) {  // an interval's sample; one asked for meanwhile comes next
      lock.lock();
      continue;
    }
    const EnergyCounts counts = counts_of(totals(now));
    lock.lock();
    latest_ = counts;
    answered_ = request;
    answered_cv_.notify_all();
  }
}

EnergyCounts EnergySampler::sample_now() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (stopping_) return latest_;
  const uint64_t request = ++requested_;
  cv_.notify_all();
  answered_cv_.wait(lock, [&] { return answered_ >= request; });
  return latest_;
}

void EnergySampler::sample_and_write(double now) {
  rapl_.sample();
  nvml_.sample();
  // One row per device: RAPL domains as cpuN / dramN, GPUs as gpuN; none for one whose
  // reading failed (its place kept, so that the others' powers stay theirs).
  struct Row {
    std::string device;
    double joules;
    bool failed;
  };
  std::vector<Row> rows;
  int packages = 0, drams = 0;
  for (const RaplCounters::Domain& d : rapl_.domains()) {
    const bool package = d.kind == "package";
    rows.push_back({(package ? "cpu" : "dram") + std::to_string(package ? packages++ : drams++),
                    d.joules, d.failed});
  }
  for (size_t i = 0; i < nvml_.joules().size(); ++i) {
    rows.push_back({"gpu" + std::to_string(i), nvml_.joules()[i], nvml_.failed(i)});
  }
  if (last_joules_.size() != rows.size()) last_joules_.assign(rows.size(), 0.0);
  const double dt = now - last_;
  std::string text;
  char line[160];
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].failed) continue;
    const double power = dt > 0 ? (rows[i].joules - last_joules_[i]) / dt : 0.0;
    std::snprintf(line, sizeof(line), "%.3f,%s,%.3f,%.3f\n", now - start_, rows[i].device.c_str(),
                  power, rows[i].joules);
    text += line;
    last_joules_[i] = rows[i].joules;
  }
  last_ = now;
  if (!text.empty()) append(text);
}

EnergyTotals EnergySampler::totals(double now) const {
  EnergyTotals t;
  t.cpu = rapl_.cpu();
  t.dram = rapl_.dram();
  t.gpu = nvml_.gpu();
  t.gpu_active = nvml_.gpus_at(active_);
  if (!active_reason_.empty()) t.gpu_active = EnergySource{std::nullopt, active_reason_};
  t.seconds = now - start_;
  return t;
}

EnergyCounts counts_of(const EnergyTotals& t) {
  EnergyCounts c;
  const auto sources = t.sources();
  for (int i = 0; i < kEnergySources; ++i) {
    c.joules[i] = sources[i]->joules.value_or(0.0);
    c.read[i] = sources[i]->joules.has_value();
  }
  c.seconds = t.seconds;
  return c;
}

EnergyTotals EnergySampler::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  const double now = now_seconds();
  sample_and_write(now);
  const EnergyTotals t = totals(now);
  std::lock_guard<std::mutex> lock(mutex_);
  latest_ = counts_of(t);
  return t;
}

}  // namespace hpctrain
