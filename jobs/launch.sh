#!/usr/bin/env bash
# Starts `hpctrain train` under mpiexec or srun and, when the run fails, starts it again
# from the newest checkpoint, up to R times (like torchrun --max-restarts).
#
#   jobs/launch.sh [--max-restarts R] [--launcher CMD] -- CONFIG.yaml [hpctrain train options]
#   jobs/launch.sh --max-restarts 3 --launcher "mpiexec -n 4" -- configs/fashion_mnist_mlp.yaml
#   srun inside a batch job:  jobs/launch.sh --launcher srun -- configs/x.yaml --set train.epochs=20
#
# Options:
#   --max-restarts R  restarts after a failure (default 3); 0 runs once.
#   --launcher CMD    the MPI launcher, word-split (default: "srun" inside a Slurm job,
#                     else "mpiexec -n ${HPCTRAIN_RANKS:-2}"). srun gets
#                     --mpi=${HPCTRAIN_SRUN_MPI:-pmi2} (Debian's MPICH needs it) and
#                     --wait=60 unless CMD sets them.
#   --hpctrain PATH   the binary (default $HPCTRAIN, else hpctrain on PATH, else
#                     build/hpctrain of the source tree this script is in).
# The first run uses the given --resume (default auto); every restart uses --resume auto, or
# auto:PATH for a first run given --resume PATH (the run's own newest checkpoint, else PATH).
#
# Exit codes (hpctrain's, see docs/contracts.md):
#   0   training finished.
#   2   bad usage, config or input: returned at once, never retried.
#   75  stopped on a signal after committing a checkpoint: passed through, so a Slurm
#       batch script can requeue the job (jobs/train_single_node.sbatch).
#   1   still failing after R restarts (any other exit code counts as a failure).
# SIGUSR1 and SIGTERM sent to this script are forwarded to the launcher as SIGUSR1
# (srun and hydra's mpiexec pass SIGUSR1 on to every rank; srun answers a SIGTERM of
# its own by killing the ranks with SIGKILL), so the ranks checkpoint and stop; no
# restart follows. A signal in a run's first 2 s is passed on at 2 s (srun, and a rank
# still loading its libraries, die of one that comes before their handlers). In a batch
# job Slurm's warning goes to the batch shell: run this script in the background from a
# shell that traps the signal, passes it on and requeues on 75, as
# jobs/train_single_node.sbatch does with hpctrain (`exec` it, and the job ends with 75,
# not requeued; a shell that runs it in the foreground dies of the signal first).
set -uo pipefail
# The traps come first: a signal that arrives before a run starts stops the launcher
# without starting it (exit 75), instead of ending this shell.
child="" child_started=0
stop_signal=""
# shellcheck disable=SC2317  # called from the traps
pass_on() {
  while ((SECONDS - child_started < 2)); do sleep 0.2; done
  kill -USR1 "$child" 2>/dev/null
}
# shellcheck disable=SC2317  # called from the traps
forward() {
  trapped=1
  stop_signal=$1
  echo "launch.sh: SIG$1 received: asking the ranks to checkpoint and stop" >&2
  [[ -n "$child" ]] && pass_on
}
trapped=0
trap 'forward USR1' USR1
trap 'forward TERM' TERM

usage() {  # usage 0: asked for (stdout); usage 2: a bad command line (stderr)
  if [[ ${1:-2} == 0 ]]; then
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  else
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  fi
  exit "${1:-2}"
}

max_restarts=3
launcher=""
hpctrain=${HPCTRAIN:-$(command -v hpctrain || echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/hpctrain")}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --max-restarts) [[ $# -ge 2 ]] || usage; max_restarts=$2; shift 2 ;;
    --max-restarts=*) max_restarts=${1#*=}; shift ;;
    --launcher) [[ $# -ge 2 ]] || usage; launcher=$2; shift 2 ;;
    --launcher=*) launcher=${1#*=}; shift ;;
    --hpctrain) [[ $# -ge 2 ]] || usage; hpctrain=$2; shift 2 ;;
    --hpctrain=*) hpctrain=${1#*=}; shift ;;
    --) shift; break ;;
    -h | --help) usage 0 ;;
    *) echo "launch.sh: unknown option $1 (hpctrain options go after --)" >&2; exit 2 ;;
  esac
done
[[ $# -ge 1 ]] || { echo "launch.sh: expected -- CONFIG.yaml [hpctrain train options]" >&2; exit 2; }
[[ "$max_restarts" =~ ^[0-9]+$ ]] || { echo "launch.sh: --max-restarts: expected a count, got '$max_restarts'" >&2; exit 2; }
max_restarts=$((10#$max_restarts))  # 08 is eight, not an octal error that never gives up
# A binary that is not there is bad usage, not a crash to restart from.
command -v "$hpctrain" >/dev/null || {
  echo "launch.sh: $hpctrain: no such program (give --hpctrain PATH, set HPCTRAIN, or put hpctrain on PATH)" >&2
  exit 2
}
config=$1
shift

if [[ -z "$launcher" ]]; then
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then launcher=srun; else launcher="mpiexec -n ${HPCTRAIN_RANKS:-2}"; fi
fi
read -r -a launch_cmd <<<"$launcher"
if [[ "${launch_cmd[0]##*/}" == srun ]]; then
  [[ "$launcher" == *--mpi* ]] || launch_cmd+=("--mpi=${HPCTRAIN_SRUN_MPI:-pmi2}")
  # A rank that dies without MPI_Abort must not leave the others hanging (see
  # jobs/train_single_node.sbatch for why not --kill-on-bad-exit).
  [[ "$launcher" == *--wait* ]] || launch_cmd+=(--wait=60)
fi

# hpctrain options without --resume (the restarts put their own), and the first --resume.
train_args=()
resume=auto
while [[ $# -gt 0 ]]; do
  case "$1" in
    --resume) [[ $# -ge 2 ]] || { echo "launch.sh: --resume needs a value" >&2; exit 2; }
      resume=$2; shift 2 ;;
    --resume=*) resume=${1#*=}; shift ;;
    *) train_args+=("$1"); shift ;;
  esac
done

# run.dir of this run, where hpctrain leaves a STOPPED marker when a signal stopped it, as
# hpctrain resolves it from the config and the --set options. Prints nothing when it
# cannot tell.
run_dir() {
  "$hpctrain" config "$config" "${train_args[@]}" --get run.dir 2>/dev/null
}

attempt=0
while :; do
  if [[ -n "$stop_signal" ]]; then
    echo "launch.sh: SIG$stop_signal received before run $((attempt + 1)) started: exit 75, resume from the newest checkpoint" >&2
    exit 75
  fi
  cmd=("${launch_cmd[@]}" "$hpctrain" train "$config" "${train_args[@]}" --resume "$resume")
  echo "launch.sh: run $((attempt + 1)): ${cmd[*]}" >&2
  # In the background, so that a trapped signal is handled while the run goes on.
  child_started=$SECONDS
  "${cmd[@]}" &
  child=$!
  # A signal between starting the run and knowing its pid was not passed on.
  [[ -n "$stop_signal" ]] && pass_on
  rc=0
  wait "$child" || rc=$?
  # A trap ends a wait early (> 128), the step still running or just ending: wait
  # again until no trap came between; 127 there: the status was collected before.
  while ((trapped)); do
    trapped=0
    last=$rc
    rc=0
    wait "$child" 2>/dev/null || rc=$?
    ((rc == 127)) && rc=$last && break
  done
  child=""

  # hydra's mpiexec (MPICH 4.0) sometimes reports 0 after forwarding a signal although
  # every rank exited 75; hpctrain's STOPPED marker tells the two apart.
  if [[ $rc == 0 ]]; then
    dir=$(run_dir)
    if [[ -n "$dir" && -f "$dir/STOPPED" ]] || [[ -z "$dir" && -n "$stop_signal" ]]; then
      echo "launch.sh: the run stopped on a signal (${dir:-run.dir unknown}/STOPPED) though the launcher reported 0: exit 75" >&2
      rc=75
    fi
  fi
  case $rc in
    0) exit 0 ;;
    2) echo "launch.sh: bad usage, config or input (exit 2): not retrying" >&2; exit 2 ;;
    75) exit 75 ;;
  esac
  if [[ -n "$stop_signal" ]]; then
    echo "launch.sh: stopped by SIG$stop_signal, run exited $rc: not restarting" >&2
    exit 1
  fi
  if ((attempt >= max_restarts)); then
    echo "launch.sh: run exited $rc; giving up after $max_restarts restart(s)" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  # The run's own newest checkpoint, else the PATH the first run was given (auto:PATH).
  case $resume in
    auto | never) resume=auto ;;
    auto:*) ;;
    *) resume="auto:$resume" ;;
  esac
  echo "launch.sh: restart $attempt/$max_restarts after exit code $rc, resuming from the newest checkpoint" >&2
done
