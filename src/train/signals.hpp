// SIGUSR1 and SIGTERM (Slurm's warning signal and its time-limit signal), and a first
// SIGINT (Ctrl-C; a second one kills), ask the job to stop: the handler only records the
// signal; the trainer polls it at step boundaries, agrees with the other ranks on a stop
// step, checkpoints and exits 75.
#pragma once

namespace hpctrain {

// Installs the handlers (idempotent).
void install_stop_signals();
// The signal received (SIGUSR1, SIGTERM or SIGINT), or 0 if none yet.
int stop_signal();

}  // namespace hpctrain
