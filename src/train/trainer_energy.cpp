// Energy sampling around the epochs: one sampler per node (node-local rank 0), summed over
// the nodes at the end.

#include <filesystem>
#include <string>

#include "core/host.hpp"
#include "train/trainer.hpp"

namespace hpctrain {
namespace {

constexpr const char* kPowercapRoot = "/sys/class/powercap";

}  // namespace

void Trainer::start_energy() {
  // This run's samples replace an earlier run's (a resume's, or one on other nodes): every
  // power file is removed before any sampler starts, also where sampling is now off.
  if (rank_ == 0) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(config_.run.dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name == "power.csv" || (name.rfind("power-", 0) == 0 && name.size() > 10 &&
                                  name.compare(name.size() - 4, 4, ".csv") == 0)) {
        std::filesystem::remove(e.path(), ec);
      }
    }
  }
  {
    WatchdogScope w(*watchdog_, "removing earlier power samples", global_step_);
    comm_->barrier();
  }
  if (config_.energy.interval_ms <= 0) return;
  if (local_rank_ == 0) {
    // Rank 0's node writes power.csv; any other node power-<host>.csv beside it.
    const std::string csv =
        config_.run.dir + (rank_ == 0 ? "/power.csv" : "/power-" + host_name() + ".csv");
    energy_ =
        std::make_unique<EnergySampler>(config_.energy.interval_ms / 1000.0, csv, kPowercapRoot);
  }
  // Every rank starts its first epoch's clock once the samplers run (nvmlInit can take a
  // second or two, which the slowest rank's clock would otherwise count as training).
  WatchdogScope w(*watchdog_, "energy samplers' start", global_step_);
  comm_->barrier();
}

std::optional<EnergySummary> Trainer::finish_energy(double samples) {
  if (config_.energy.interval_ms <= 0) return std::nullopt;
  EnergyTotals t;
  double v[7] = {0, 0, 0, 0, 0, 0, 0};  // joules and readable, per source; samplers
  if (energy_) {
    t = energy_->finish();
    energy_.reset();
    const EnergySource* sources[3] = {&t.cpu, &t.dram, &t.gpu};
    for (int i = 0; i < 3; ++i) {
      v[2 * i] = sources[i]->joules.value_or(0.0);
      v[2 * i + 1] = sources[i]->joules ? 1.0 : 0.0;
    }
    v[6] = 1;
  }
  double seconds = t.seconds;
  {
    WatchdogScope w(*watchdog_, "energy reduction", global_step_);
    comm_->allreduce_sum(v, 7);
    comm_->allreduce_max(&seconds, 1);
  }
  EnergySummary e;
  e.seconds = seconds;
  e.samples = samples;
  EnergySummary::Source* out[3] = {&e.cpu, &e.dram, &e.gpu};
  const EnergySource* mine[3] = {&t.cpu, &t.dram, &t.gpu};
  for (int i = 0; i < 3; ++i) {
    if (v[2 * i + 1] == v[6]) {
      out[i]->joules = v[2 * i];
    } else {
      // Rank 0's node says why; else some other node could not read it.
      out[i]->reason = !mine[i]->joules ? mine[i]->reason : "not readable on every node of the job";
    }
  }
  return e;
}

}  // namespace hpctrain
