#!/usr/bin/env bash
# Stand-in for build/hpctrain that follows its outward contract (docs/contracts.md) without
# doing any training, so the job scripts and the launcher can be tested in seconds:
#   stub_hpctrain.sh train CONFIG [--set key=value]... [--resume auto|never|PATH|auto:PATH]
#   stub_hpctrain.sh config CONFIG [--set key=value]... --get run.dir
# It "trains" STUB_STEPS steps of STUB_STEP_SECONDS each, commits a checkpoint
# (checkpoints/step-N) every STUB_CKPT_EVERY steps, and on SIGUSR1/SIGTERM commits one
# and exits 75. --resume auto continues from the newest checkpoint. At the end rank 0
# writes summary.json (epochs_completed = train.epochs, world_size = PMI_SIZE,
# resumed_from, params_sha256 = "stub-" and the step count).
# Exit 2 when CONFIG is missing or run.dir is not set; STUB_CRASH_AT_STEP=N exits 1
# at step N the first time (STUB_CRASH_ALWAYS=1: every time). Only rank 0 writes files;
# it appends its command line to stub-args.txt in run.dir. STUB_RESUME_STEPS=N: a
# resumed run stops N steps after its checkpoint. Like hpctrain, a signal stop leaves
# run.dir/STOPPED (removed when a run starts); STUB_LOSE_75=1 then exits 0, as hydra's
# mpiexec sometimes reports.
set -uo pipefail

steps=${STUB_STEPS:-40}
step_s=${STUB_STEP_SECONDS:-0.1}
ckpt_every=${STUB_CKPT_EVERY:-5}
rank=${PMI_RANK:-${SLURM_PROCID:-0}}

command=${1:-}
[[ "$command" == train || "$command" == config ]] || { echo "stub: usage: $0 train|config CONFIG [...]" >&2; exit 2; }
all_args="$*"
config=${2:-}
[[ -f "$config" ]] || { echo "stub: $config: no such config file" >&2; exit 2; }
shift 2
run_dir="" resume=never epochs=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --set | --set=*)
      if [[ "$1" == --set ]]; then kv=${2:-}; shift; shift; else kv=${1#--set=}; shift; fi
      case "$kv" in
        run.dir=*)
          run_dir=${kv#run.dir=}
          [[ $run_dir == \"*\" ]] && run_dir=${run_dir:1:-1} ;;  # YAML's quotes
        train.epochs=*) epochs=${kv#train.epochs=} ;;
      esac ;;
    --resume) resume=${2:-}; shift; shift ;;
    --resume=*) resume=${1#--resume=}; shift ;;
    --get) [[ "$command" == config && "${2:-}" == run.dir ]] || { echo "stub: --get run.dir only" >&2; exit 2; }
      shift 2 ;;
    *) echo "stub: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$run_dir" ]]; then  # an indented "dir:" line in the config (run.dir), else refuse
  run_dir=$(sed -n -E 's/^[[:space:]]+dir:[[:space:]]*"?([^"#]*[^"#[:space:]])"?.*/\1/p' "$config" | head -n 1)
fi
[[ -n "$run_dir" ]] || { echo "stub: set run.dir (--set run.dir=DIR or in the config)" >&2; exit 2; }
if [[ "$command" == config ]]; then
  echo "$run_dir"
  exit 0
fi
mkdir -p "$run_dir/checkpoints"
[[ "$rank" == 0 ]] && rm -f "$run_dir/STOPPED"
[[ "$rank" == 0 ]] && echo "$all_args" >> "$run_dir/stub-args.txt"

newest_checkpoint() {
  local f best=-1 n
  for f in "$run_dir"/checkpoints/step-*; do
    [[ -f "$f" ]] || continue
    n=${f##*/step-}
    ((n > best)) && best=$n
  done
  echo "$best"
}

commit() {  # rank 0 writes step-N atomically; the others only pretend
  [[ "$rank" == 0 ]] || return 0
  echo "$1" > "$run_dir/checkpoints/.step-$1.tmp" && mv "$run_dir/checkpoints/.step-$1.tmp" "$run_dir/checkpoints/step-$1"
}

step=0 resumed_from=null
n=$(newest_checkpoint)
case "$resume" in
  auto) if ((n >= 0)); then step=$n; resumed_from=$n; fi ;;
  never) ;;
  auto:*) if ((n >= 0)); then step=$n; resumed_from=$n; else resume=${resume#auto:}; fi ;;
esac
case "$resume" in
  auto | auto:* | never) ;;
  *) [[ -f "$resume" ]] || { echo "stub: $resume: no such checkpoint" >&2; exit 2; }
     step=$(cat "$resume"); resumed_from=$step ;;
esac
# A resumed run may be cut short, so that a test need not wait for the whole run twice.
if [[ "$resumed_from" != null && -n "${STUB_RESUME_STEPS:-}" ]]; then
  steps=$((step + STUB_RESUME_STEPS))
fi
[[ "$rank" == 0 ]] && echo "stub: rank 0 of ${PMI_SIZE:-${SLURM_NTASKS:-1}} starting at step $step (resumed_from $resumed_from)"

stop=""
trap 'stop=USR1' USR1
trap 'stop=TERM' TERM
while ((step < steps)); do
  if [[ -n "$stop" ]]; then
    commit "$step"
    if [[ "$rank" == 0 ]]; then
      echo "step $step" >"$run_dir/STOPPED"
      echo "stub: SIG$stop: checkpoint committed at step $step, exiting 75"
    fi
    [[ -n "${STUB_LOSE_75:-}" ]] && exit 0  # what hydra's mpiexec sometimes reports
    exit 75
  fi
  sleep "$step_s"
  step=$((step + 1))
  if [[ -n "${STUB_CRASH_AT_STEP:-}" && "$step" == "$STUB_CRASH_AT_STEP" ]]; then
    if [[ -n "${STUB_CRASH_ALWAYS:-}" || ! -e "$run_dir/.stub-crashed-$rank" ]]; then
      touch "$run_dir/.stub-crashed-$rank"
      echo "stub: rank $rank crashing at step $step" >&2
      exit 1
    fi
  fi
  ((step % ckpt_every == 0)) && commit "$step"
done
if [[ "$rank" == 0 ]]; then
  printf '{"epochs_completed": %s, "world_size": %s, "resumed_from": %s, "params_sha256": "stub-%s"}\n' \
    "$epochs" "${PMI_SIZE:-${SLURM_NTASKS:-1}}" "$resumed_from" "$steps" > "$run_dir/summary.json"
  echo "stub: finished $steps steps"
fi
exit 0
