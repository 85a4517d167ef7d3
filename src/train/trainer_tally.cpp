// The figures of an epoch across a resume: what a checkpoint in the middle of an epoch
// carries, so that the epoch's metrics.csv row covers the whole epoch; and what the
// checkpoint resumed from carried, of the epoch and of the run's energy.
#include "core/timer.hpp"
#include "train/trainer.hpp"

namespace hpctrain {

EpochTally Trainer::own_tally(double t0, double wait0, double comm_s, double cpu0) {
  EpochTally t;
  t.train_s = now_seconds() - t0;
  t.wait_s = train_loader_ ? train_loader_->wait_seconds() - wait0 : 0.0;
  t.comm_s = comm_s;
  t.cpu_s = process_cpu_seconds() - cpu0;
  LossStats s;
  backend_->copy_to_host(&s, stats_.data(), sizeof(s));
  t.loss_sum = s.loss_sum;
  t.correct = s.correct;
  t.count = s.count;
  return t;
}

void Trainer::keep_epoch_so_far(int epoch, double t0, double wait0, double comm_s, double cpu0) {
  WatchdogScope w(*watchdog_, "the epoch's figures for a checkpoint", global_step_);
  backend_->synchronize();
  EpochTally all = carried(epoch);
  all += reduce_tally(*comm_, own_tally(t0, wait0, comm_s, cpu0), tally_scratch_);
  encode_tally(epoch, all, epoch_so_far_);
}

void Trainer::take_carried(bool resumed) {
  carried_epoch_ = static_cast<int>(global_step_ / steps_per_epoch_) + 1;
  carried_ = decode_tally(epoch_so_far_, carried_epoch_);
  encode_tally(carried_epoch_, carried_, epoch_so_far_);
  // A run that starts carries no energy, all of which is known.
  energy_carried_ = resumed ? decode_energy(energy_so_far_) : EnergySoFar::nothing_yet();
  encode_energy(energy_carried_, energy_so_far_);
}

EpochTally Trainer::carried(int epoch) const {
  return epoch == carried_epoch_ ? carried_ : EpochTally{};
}

}  // namespace hpctrain
