#!/usr/bin/env bash
# jobs/study.sbatch under a local Slurm: a study of 1 and 2 ranks runs each training as an
# srun step of one allocation. The test sends the batch shell SIGUSR1 (what
# --signal=B:USR1@120 does) while the 2-rank run has a checkpoint: the ranks must exit 75,
# the driver 75, the script must requeue the job, and the requeued job must keep the
# finished runs, resume the stopped one and write study.csv.
#
#   bash tests/slurm/test_study_job.sh BUILD_DIR DATA_DIR      exit 0 pass, 1 fail, 77 skip
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR
source "$here/slurm_cluster.sh"
terminal='COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED'
say() { echo "[$(date +%T)] $*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ $# -eq 2 ]] || fail "usage: $0 BUILD_DIR DATA_DIR"
build=$(cd "$1" 2>/dev/null && pwd) || fail "no build directory $1"
data=$(cd "$2" 2>/dev/null && pwd) || fail "no data directory $2"
hpctrain=$build/hpctrain
[[ -x "$hpctrain" ]] || fail "$hpctrain is not an executable"

slurm_cluster_start || exit $?
w=$SLURM_TEST_DIR/jobs
cd "$repo" || exit 1
out=$w/study
cat >"$w/study.yaml" <<YAML
config: $repo/configs/fashion_mnist_mlp.yaml
repeats: 1
set: [data.train=$data/test.h5, data.val=$data/val.h5, "data.test=", train.epochs=3,
      run.threads=1, device=cpu, train.progress_seconds=0]
variants:
  - {name: one, ranks: 1}
  - {name: two, ranks: 2, set: [debug.slow_rank.rank=0, debug.slow_rank.factor=40]}
YAML

show_job() {
  scontrol show job "$1" >&2
  echo "----- job output" >&2
  cat "$w/job.out" >&2 2>/dev/null
}
job_ended() { [[ "$(slurm_job_field "$job" JobState)" =~ ^($terminal)$ ]]; }

say "== submitting jobs/study.sbatch"
job=$(HPCTRAIN=$hpctrain sbatch --parsable --ntasks=2 --cpus-per-task=1 -o "$w/job.out" \
  jobs/study.sbatch "$w/study.yaml" --out "$out" --no-plots) || fail "sbatch refused jobs/study.sbatch"
say "job $job"

start=$SECONDS
until [[ -n "$(ls -A "$out/runs/two/r0/checkpoints" 2>/dev/null)" ]]; do
  if job_ended || ((SECONDS - start > 180)); then
    show_job "$job"
    fail "the 2-rank run did not checkpoint within $((SECONDS - start)) s"
  fi
  sleep 0.1
done
say "== the 2-rank run has a checkpoint: SIGUSR1 to the batch shell"
scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch $job failed"

state=$(slurm_wait_job_state "$job" "$terminal" 300) || { show_job "$job"; fail "job still $state after 300 s"; }
if [[ "$state" != COMPLETED || "$(slurm_job_field "$job" Restarts)" != 1 ]]; then
  show_job "$job"
  fail "job ended $state after $(slurm_job_field "$job" Restarts) restarts (expected COMPLETED after 1)"
fi
grep -q "stopped with a checkpoint; requeuing job $job" "$w/job.out" ||
  { show_job "$job"; fail "the script did not requeue after exit 75"; }

python3 - "$out" <<'PY' || { show_job "$job"; fail "study check failed"; }
import csv, json, os, sys
out = sys.argv[1]
def marker(v):
    return json.load(open(os.path.join(out, "runs", v, "r0", "study-run.json")))
one, two = marker("one"), marker("two")
errors = []
if one["attempts"] != 1:
    errors.append(f"the finished 1-rank run ran {one['attempts']} times")
if two["attempts"] != 2 or two["exit_code"] != 0:
    errors.append(f"2-rank run: {two}")
if not two["command"].startswith("srun "):
    errors.append(f"not an srun step: {two['command']}")
s = json.load(open(os.path.join(out, "runs", "two", "r0", "summary.json")))
if s["resumed_from"] is None or s["world_size"] != 2:
    errors.append(f"2-rank summary: resumed_from {s['resumed_from']}, world {s['world_size']}")
rows = list(csv.DictReader(open(os.path.join(out, "study.csv"))))
if [r["variant"] for r in rows] != ["one", "two"]:
    errors.append(f"study.csv rows {rows}")
for e in errors:
    print("FAIL:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
say "PASS: the study ran as srun steps, stopped on the signal, requeued and resumed"
