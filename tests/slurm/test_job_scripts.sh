#!/usr/bin/env bash
# The jobs/ scripts under a real (local) Slurm, with tests/slurm/stub_hpctrain.sh standing
# in for hpctrain, so this checks the scripts themselves in under a minute and a half:
#   A  train_single_node.sbatch: SIGUSR1 to the batch shell (scancel --batch) reaches
#      the ranks, they exit 75, the job requeues itself and resumes from the checkpoint.
#   B  the same with the warning coming from Slurm itself (--time=1 --signal=B:USR1@59).
#   C  train_multi_node.sbatch (on this one node) runs to the end.
#   D  sweep_array.sbatch: each array task trains its own line in its own run.dir.
#   E  chain.sh: link 1 stops on the signal (exit 75, no requeue), link 2 resumes (the
#      --resume never given is the first link's) and finishes, links 3 and 4 are cancelled
#      (on link 2 alone, the cancelled link 3 would have let link 4 start).
#   F  a missing config ends the job with exit 2 and no requeue.
#   G  launch.sh --launcher srun in a batch job restarts a crashed run from its checkpoint.
#   H  scancel of a running train_single_node.sbatch job: the ranks checkpoint, and the job
#      ends CANCELLED, not requeued (SIGTERM is scancel's and the time limit's).
#   bash tests/slurm/test_job_scripts.sh     exit 0 pass, 1 fail, 77 skip
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR
source "$here/slurm_cluster.sh"
terminal='COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED'

# The stub ranks only sleep: give the node more CPUs than the machine has so that the
# cases run side by side.
SLURM_TEST_CPUS=${SLURM_TEST_CPUS:-8}
slurm_cluster_start || exit $?
w=$SLURM_TEST_DIR/jobs
cd "$repo" || exit 1
export HPCTRAIN=$here/stub_hpctrain.sh STUB_STEP_SECONDS=0.1 STUB_STEPS=40 STUB_CKPT_EVERY=5
echo "run: {}" >"$w/config.yaml"
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
show() {  # show JOBID OUTFILE...: job record and outputs, for a failure message
  scontrol show job "$1" >&2
  shift
  local f
  for f in "$@"; do echo "----- $f" >&2; cat "$f" >&2 2>/dev/null; done
}
submit() { sbatch --parsable --cpus-per-task=1 "$@"; }

# B first: Slurm checks time limits every 30 s, so its warning takes longest.
jb=$(STUB_STEPS=100000 STUB_RESUME_STEPS=10 submit --ntasks=1 --gpus-per-task=1 --time=1 --signal=B:USR1@59 -o "$w/b.out" \
  jobs/train_single_node.sbatch "$w/config.yaml" --set "run.dir=$w/b" --set extra.b=1) ||
  { echo "FAIL: sbatch refused jobs/train_single_node.sbatch" >&2; exit 1; }
ja=$(STUB_STEPS=60 submit -o "$w/a.out" jobs/train_single_node.sbatch "$w/config.yaml" --set "run.dir=$w/a")
jc=$(submit --nodes=1 --ntasks-per-node=2 -o "$w/c.out" jobs/train_multi_node.sbatch \
  "$w/config.yaml" --set "run.dir=$w/c")
cat >"$w/sweep.txt" <<EOF
# a comment, then a blank line

$w/config.yaml --set optimizer.lr=0.01
$w/config.yaml --set optimizer.lr=0.02
$w/config.yaml --set optimizer.lr=0.03 --set run.dir=$w/sweep-own-dir
EOF
jd=$(HPCTRAIN_SWEEP_DIR=$w/sweep STUB_STEPS=10 submit --array=0-2 -o "$w/d-%a.out" \
  jobs/sweep_array.sbatch "$w/sweep.txt")
mapfile -t je < <(STUB_STEPS=60 jobs/chain.sh -n 4 --sbatch "--cpus-per-task=1 -o $w/e-%j.out" \
  -- "$w/config.yaml" --set "run.dir=$w/e" --resume never)
jf=$(submit -o "$w/f.out" jobs/train_single_node.sbatch "$w/missing.yaml" --set "run.dir=$w/f")
jg=$(STUB_CRASH_AT_STEP=7 submit --ntasks=2 -o "$w/g.out" --wrap \
  "jobs/launch.sh --launcher srun --max-restarts 2 -- $w/config.yaml --set run.dir=$w/g")
jh=$(STUB_STEPS=100000 submit -o "$w/h.out" jobs/train_single_node.sbatch "$w/config.yaml" \
  --set "run.dir=$w/h")
echo "jobs: A=$ja B=$jb C=$jc D=$jd E=${je[*]} F=$jf G=$jg H=$jh"
[[ ${#je[@]} == 4 ]] || fail "E: chain.sh printed ${#je[@]} job ids, expected 4"

# A and E: stop them (batch shell only, as --signal=B: does) once a checkpoint exists.
for case in "A $ja $w/a USR1" "E ${je[0]} $w/e USR1"; do
  read -r name job dir sig <<<"$case"
  if slurm_wait 60 test -e "$dir/checkpoints/step-5"; then
    scancel --signal="$sig" --batch "$job" || fail "$name: scancel --signal=$sig --batch $job failed"
  else
    fail "$name: no checkpoint after 60 s"
  fi
done

check_requeued_and_resumed() {  # NAME JOB OUT RUNDIR
  local name=$1 job=$2 out=$3 dir=$4 state
  state=$(slurm_wait_job_state "$job" "$terminal" 150) || { fail "$name: job $job still $state"; show "$job" "$out"; return; }
  if [[ "$state" != COMPLETED || "$(slurm_job_field "$job" Restarts)" != 1 ]]; then
    fail "$name: job $job ended $state after $(slurm_job_field "$job" Restarts) restarts (expected COMPLETED after 1)"
    show "$job" "$out"
    return
  fi
  grep -q "exiting 75" "$out" || fail "$name: the ranks did not report a checkpoint on the signal"
  grep -q "requeuing job $job" "$out" || fail "$name: the script did not requeue the job"
  grep -q "== job $job restart 1" "$out" || fail "$name: no second run in the (appended) output"
  grep -q '"resumed_from": [0-9]' "$dir/summary.json" 2>/dev/null ||
    fail "$name: summary.json does not show a resumed run: $(cat "$dir/summary.json" 2>&1)"
  grep -q -- "--resume auto" "$dir/stub-args.txt" || fail "$name: hpctrain was not run with --resume auto"
  echo "ok $name: stopped on the signal, exit 75, requeued, resumed, finished"
}
check_requeued_and_resumed A "$ja" "$w/a.out" "$w/a"
grep -q "run.threads=1" "$w/a/stub-args.txt" || fail "A: --cpus-per-task was not passed as run.threads"

# B: once requeued, give the job room to finish (otherwise it is warned again at once).
if slurm_wait 90 grep -q "requeuing job $jb" "$w/b.out"; then
  scontrol update JobId="$jb" TimeLimit=10 || fail "B: cannot raise the time limit"
  check_requeued_and_resumed B "$jb" "$w/b.out" "$w/b"
else
  fail "B: no warning signal within 90 s of a 1-minute limit"
  show "$jb" "$w/b.out"
fi

state=$(slurm_wait_job_state "$jc" "$terminal" 60)
if [[ "$state" == COMPLETED && -f "$w/c/summary.json" ]]; then
  echo "ok C: multi-node script ran to the end"
else
  fail "C: job $jc ended $state"
  show "$jc" "$w/c.out"
fi

d_failures=$failures
for i in 0 1 2; do
  state=$(slurm_wait_job_state "${jd}_$i" "$terminal" 60)
  dir=$w/sweep/$i
  [[ $i == 2 ]] && dir=$w/sweep-own-dir
  if [[ "$state" != COMPLETED ]]; then
    fail "D: array task $i ended $state"
    show "${jd}_$i" "$w/d-$i.out"
  elif ! grep -q "optimizer.lr=0.0$((i + 1))" "$dir/stub-args.txt" 2>/dev/null; then
    fail "D: task $i did not train line $i in $dir: $(cat "$dir/stub-args.txt" 2>&1)"
  fi
done
((failures == d_failures)) && echo "ok D: each array task trained its own line in its own run.dir"

state1=$(slurm_wait_job_state "${je[0]}" "$terminal" 60)
state2=$(slurm_wait_job_state "${je[1]}" "$terminal" 90)
state3=$(slurm_wait_job_state "${je[2]}" "$terminal" 30)
state4=$(slurm_wait_job_state "${je[3]}" "$terminal" 30)
if [[ "$state1/$state2/$state3/$state4" != FAILED/COMPLETED/CANCELLED/CANCELLED ||
  "$(slurm_job_field "${je[0]}" ExitCode)" != 75:0 ]]; then
  fail "E: chain ended $state1/$state2/$state3/$state4, link 1 exit $(slurm_job_field "${je[0]}" ExitCode) (expected FAILED/COMPLETED/CANCELLED/CANCELLED, 75:0)"
  show "${je[0]}" "$w/e-${je[0]}.out" "$w/e-${je[1]}.out"
elif ! grep -q '"resumed_from": [0-9]' "$w/e/summary.json"; then
  fail "E: link 2 did not resume: $(cat "$w/e/summary.json")"
else
  echo "ok E: chain link 1 stopped with 75, link 2 resumed and finished, links 3 and 4 cancelled"
fi

state=$(slurm_wait_job_state "$jf" "$terminal" 60)
if [[ "$state" == FAILED && "$(slurm_job_field "$jf" ExitCode)" == 2:0 && "$(slurm_job_field "$jf" Restarts)" == 0 ]]; then
  echo "ok F: a missing config fails the job with exit 2, no requeue"
else
  fail "F: job $jf ended $state, exit $(slurm_job_field "$jf" ExitCode), restarts $(slurm_job_field "$jf" Restarts)"
  show "$jf" "$w/f.out"
fi

state=$(slurm_wait_job_state "$jg" "$terminal" 60)
if [[ "$state" == COMPLETED ]] && grep -q "^launch.sh: restart 1/2" "$w/g.out" &&
  grep -q "^launch.sh: run 1: srun --mpi=pmi2 --wait=60 " "$w/g.out" && grep -q '"resumed_from": 5' "$w/g/summary.json"; then
  echo "ok G: launch.sh under srun restarted a crashed run from its checkpoint"
else
  fail "G: job $jg ended $state"
  show "$jg" "$w/g.out"
fi

if slurm_wait 60 test -e "$w/h/checkpoints/step-5"; then
  scancel "$jh" || fail "H: scancel $jh failed"
  state=$(slurm_wait_job_state "$jh" "$terminal" 60)
  if [[ "$state" == CANCELLED && "$(slurm_job_field "$jh" Restarts)" == 0 ]] &&
    grep -q "not requeuing: SIGTERM" "$w/h.out"; then
    echo "ok H: scancel ended the job after its checkpoint, without a requeue"
  else
    fail "H: job $jh ended $state after $(slurm_job_field "$jh" Restarts) restarts (expected CANCELLED after 0)"
    show "$jh" "$w/h.out"
  fi
else
  fail "H: no checkpoint after 60 s"
fi

if ((failures > 0)); then
  echo "FAIL: $failures check(s) failed" >&2
  exit 1
fi
echo "PASS"
