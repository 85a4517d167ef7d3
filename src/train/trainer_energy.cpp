// Energy sampling around the epochs: one sampler per node (node-local rank 0), summed over
// the nodes at each checkpoint (which carries the run's energy so far) and at the end.

#include <cstdlib>
#include <filesystem>
#include <string>

#include "comm/device_group.hpp"
#include "core/host.hpp"
#include "train/trainer.hpp"

namespace hpctrain {
namespace {

// The powercap class folder: HPCTRAIN_POWERCAP_ROOT, a folder laid out as it (to test the
// accounting on a machine without readable RAPL), or Linux's.
std::string powercap_root() {
  const char* root = std::getenv("HPCTRAIN_POWERCAP_ROOT");
  return root && *root ? root : "/sys/class/powercap";
}

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
  if (config_.energy.interval_ms <= 0) {
    // This run's epochs are not sampled: the run's energy is no longer known.
    encode_energy(EnergySoFar{}, energy_so_far_);
    return;
  }
  sampling_ = true;
  std::vector<std::string> gpus;  // of this node's ranks: the active GPUs
  {
    WatchdogScope w(*watchdog_, "the GPUs of each node", global_step_);
    gpus = devices_on_my_node(*comm_, backend_->device_id());
  }
  if (local_rank_ == 0) {
    // Rank 0's node writes power.csv; any other node power-<host>.csv beside it.
    const std::string csv =
        config_.run.dir + (rank_ == 0 ? "/power.csv" : "/power-" + host_name() + ".csv");
    energy_ = std::make_unique<EnergySampler>(config_.energy.interval_ms / 1000.0, csv,
                                              powercap_root(), gpus);
  }
  // Every rank starts its first epoch's clock once the samplers run (nvmlInit can take a
  // second or two, which the slowest rank's clock would otherwise count as training).
  WatchdogScope w(*watchdog_, "energy samplers' start", global_step_);
  comm_->barrier();
}

void Trainer::keep_energy_so_far() {
  WatchdogScope w(*watchdog_, "the energy so far for a checkpoint", global_step_);
  EnergyCounts mine;
  if (energy_) mine = energy_->sample_now();
  EnergySoFar all = energy_carried_;
  all += reduce_energy(*comm_, energy_ ? &mine : nullptr, tally_scratch_);
  encode_energy(all, energy_so_far_);
}

std::optional<EnergySummary> Trainer::finish_energy(double samples) {
  if (!sampling_) return std::nullopt;
  sampling_ = false;
  EnergyTotals t;
  EnergyCounts mine;
  const bool sampler = energy_ != nullptr;
  if (sampler) {
    t = energy_->finish();
    energy_.reset();
    mine = counts_of(t);
  }
  EnergyCounts all;
  {
    WatchdogScope w(*watchdog_, "energy reduction", global_step_);
    all = reduce_energy(*comm_, sampler ? &mine : nullptr, tally_scratch_);
  }
  EnergySoFar whole = energy_carried_;  // what the final checkpoint carries
  whole += all;
  encode_energy(whole, energy_so_far_);
  EnergySummary e;
  e.seconds = all.seconds;
  e.samples = samples;
  const auto out = e.sources();
  const auto own = t.sources();
  for (int i = 0; i < kEnergySources; ++i) {
    if (all.read[i]) {
      out[i]->joules = all.joules[i];
    } else {
      // Rank 0's node says why; else some other node could not read it.
      out[i]->reason = !own[i]->joules ? own[i]->reason : "not readable on every node of the job";
    }
  }
  return e;
}

std::optional<EnergySummary> Trainer::whole_run_energy(const std::optional<EnergySummary>& part,
                                                       bool trained) const {
  if (trained && !part) return std::nullopt;
  const EnergyCounts& c = energy_carried_.counts;
  EnergySummary w;
  w.seconds = c.seconds + (part ? part->seconds : 0.0);
  const auto out = w.sources();
  for (int i = 0; i < kEnergySources; ++i) {
    const EnergySummary::Source* own = part ? part->sources()[i] : nullptr;  // this run's
    if (own && !own->joules) {
      out[i]->reason = own->reason;
    } else if (!energy_carried_.known) {
      out[i]->reason =
          "the checkpoint resumed from carries no energy: an earlier part of the run was not "
          "sampled (energy.interval_ms: 0), or its checkpoint was written by a release before "
          "energy was kept in checkpoints";
    } else if (!c.read[i]) {
      out[i]->reason = "an earlier part of the run could not read it on every node";
    } else {
      out[i]->joules = c.joules[i] + (own ? *own->joules : 0.0);
    }
  }
  return w;
}

}  // namespace hpctrain
