#!/usr/bin/env bash
# A Slurm job survives its time-limit warning bit for bit: a jobs/ script trains the
# Fashion-MNIST MLP on 2 ranks under a local Slurm; the test sends the batch shell
# SIGUSR1 (what --signal=B:USR1@120 does) once a checkpoint exists. The ranks must
# commit a checkpoint and exit 75, the script must requeue the job, the second run must
# resume from the checkpoint and finish, and its params_sha256 must equal that of an
# uninterrupted `mpiexec -n 2` run of the same deterministic config.
#
#   bash tests/slurm/test_requeue_resume.sh BUILD_DIR DATA_DIR [single|multi]
#   bash tests/slurm/test_requeue_resume.sh build build/e2e-data/fashion-mnist
# single (default): jobs/train_single_node.sbatch, 1 node x 2 ranks.
# multi: jobs/train_multi_node.sbatch on a 2-node cluster (two slurmd on this host),
#        2 nodes x 1 rank, so the ranks find each other across "nodes".
# BUILD_DIR holds hpctrain; DATA_DIR holds {train,val,test}.h5 from
# `hpctrain-data fashion-mnist --out DATA_DIR`. Exit 0 pass, 1 fail, 77 skip (no Slurm).
# HT_SLURM_TEST_EPOCHS (default 20) sets the run length: the run must outlast the
# signal's round trip (about a second), and an epoch takes ~0.3 s on 2 cores.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR
source "$here/slurm_cluster.sh"
terminal='COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED'
say() { echo "[$(date +%T)] $*"; }
ref_pid=""
fail() {
  echo "FAIL: $*" >&2
  [[ -n "$ref_pid" ]] && kill "$ref_pid" 2>/dev/null
  exit 1
}

[[ $# -eq 2 || $# -eq 3 ]] || fail "usage: $0 BUILD_DIR DATA_DIR [single|multi]"
case "${3:-single}" in
  single) script=jobs/train_single_node.sbatch layout=(--ntasks=2) ;;
  multi) script=jobs/train_multi_node.sbatch layout=(--nodes=2 --ntasks-per-node=1)
    export SLURM_TEST_NODES=2 ;;
  *) fail "layout must be single or multi, not '$3'" ;;
esac
build=$(cd "$1" 2>/dev/null && pwd) || fail "no build directory $1"
data=$(cd "$2" 2>/dev/null && pwd) || fail "no data directory $2 (make it: $1/hpctrain-data fashion-mnist --out $2)"
hpctrain=$build/hpctrain
[[ -x "$hpctrain" ]] || fail "$hpctrain is not an executable"
for f in train val test; do
  [[ -f "$data/$f.h5" ]] || fail "missing $data/$f.h5 (make it: $build/hpctrain-data fashion-mnist --out $data)"
done
command -v mpiexec >/dev/null || fail "mpiexec not found"

slurm_cluster_start || exit $?
w=$SLURM_TEST_DIR/jobs
cd "$repo" || exit 1
epochs=${HT_SLURM_TEST_EPOCHS:-20}
config=configs/fashion_mnist_mlp.yaml
# Same options for both runs except run.dir. run.threads and device are pinned: the
# thread count and the device must not differ between the two runs being compared.
opts=(--set "data.train=$data/train.h5" --set "data.val=$data/val.h5" --set "data.test=$data/test.h5"
  --set run.deterministic=true --set "train.epochs=$epochs" --set checkpoint.every_steps=50
  --set checkpoint.keep=3 --set run.threads=1 --set device=cpu)

show_job() {
  echo "----- scontrol show job $1" >&2
  scontrol show job "$1" >&2
  echo "----- job output $w/job.out" >&2
  cat "$w/job.out" >&2 2>/dev/null
  echo "----- $w/slurm/checkpoints" >&2
  ls -la "$w/slurm/checkpoints" >&2 2>/dev/null
}

# As a user does: submitted from a directory of their own, outside the source tree, by the
# script's full path. When the build is the tree's build/ and no hpctrain is on PATH, the
# script must find it through its own path (HPCTRAIN unset).
submit_env=(HPCTRAIN="$hpctrain")
if [[ "$build" == "$repo/build" ]] && ! command -v hpctrain >/dev/null; then
  submit_env=(-u HPCTRAIN)
fi
say "== submitting $repo/$script ${layout[*]} ($epochs epochs) from $w (env ${submit_env[*]})"
job=$(cd "$w" && env "${submit_env[@]}" sbatch --parsable "${layout[@]}" --cpus-per-task=1 \
  -o "$w/job.out" "$repo/$script" "$repo/$config" "${opts[@]}" --set "run.dir=$w/slurm") ||
  fail "sbatch refused $script"
say "job $job"

# The uninterrupted reference run, meanwhile, outside Slurm.
say "== reference run: mpiexec -n 2 $hpctrain train $config ... (uninterrupted)"
timeout 300 mpiexec -n 2 "$hpctrain" train "$config" "${opts[@]}" --set "run.dir=$w/ref" \
  >"$w/ref.out" 2>&1 &
ref_pid=$!

# 1. Training under way: a checkpoint is committed.
# A committed checkpoint, not the lock and the manifest that start-up makes there.
has_checkpoint() { compgen -G "$w/slurm/checkpoints/ckpt-*.h5" >/dev/null; }
job_ended() { [[ "$(slurm_job_field "$job" JobState)" =~ ^($terminal)$ ]]; }
start=$SECONDS
until has_checkpoint; do
  if job_ended || ((SECONDS - start > 120)); then
    show_job "$job"
    fail "training did not get under way: no checkpoint in $w/slurm/checkpoints after $((SECONDS - start)) s (job $(slurm_job_field "$job" JobState), exit $(slurm_job_field "$job" ExitCode); its output is above)"
  fi
  sleep 0.1
done
say "== checkpoint seen after $((SECONDS - start)) s: sending SIGUSR1 to the batch shell"
scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch $job failed"

# 2. The ranks stop with 75 and the script requeues the job.
start=$SECONDS
until [[ "$(slurm_job_field "$job" Restarts)" -ge 1 ]]; do
  if job_ended; then
    show_job "$job"
    if [[ "$(slurm_job_field "$job" JobState)" == COMPLETED ]]; then
      fail "job finished before the signal arrived: raise HT_SLURM_TEST_EPOCHS"
    fi
    fail "job ended $(slurm_job_field "$job" JobState) (exit $(slurm_job_field "$job" ExitCode)) instead of requeuing: hpctrain must exit 75 after a checkpoint on SIGUSR1"
  fi
  if ((SECONDS - start > 60)); then
    show_job "$job"
    fail "job not requeued 60 s after SIGUSR1"
  fi
  sleep 0.2
done
grep -q "checkpoint committed; requeuing job $job" "$w/job.out" ||
  { show_job "$job"; fail "requeued, but not by the script after exit 75"; }
say "== job stopped with exit 75 and requeued itself; waiting for the resumed run"

# 3. The requeued job resumes and finishes.
state=$(slurm_wait_job_state "$job" "$terminal" 240) || { show_job "$job"; fail "job still $state 240 s after the requeue"; }
if [[ "$state" != COMPLETED || "$(slurm_job_field "$job" ExitCode)" != 0:0 || "$(slurm_job_field "$job" Restarts)" != 1 ]]; then
  show_job "$job"
  fail "job ended $state, exit $(slurm_job_field "$job" ExitCode), $(slurm_job_field "$job" Restarts) restarts (expected COMPLETED, 0:0, 1)"
fi
grep -q "== job $job restart 1" "$w/job.out" || { show_job "$job"; fail "no second run in the job output"; }
nodes=$(slurm_job_field "$job" NumNodes)
[[ "$nodes" == "${SLURM_TEST_NODES:-1}" ]] || { show_job "$job"; fail "the job ran on $nodes node(s), expected ${SLURM_TEST_NODES:-1}"; }
say "== resumed run finished; waiting for the reference run"

ref_rc=0
wait "$ref_pid" || ref_rc=$?
if [[ $ref_rc -ne 0 ]]; then
  cat "$w/ref.out" >&2
  fail "reference run exited $ref_rc"
fi

# 4. Same parameters as the uninterrupted run, and the summary says it resumed.
commit=$("$hpctrain" --version | sed -n 's/.*(commit \([^;]*\);.*/\1/p')
python3 - "$w/slurm/summary.json" "$w/ref/summary.json" "$epochs" "$job" "$commit" <<'EOF' || { show_job "$job"; fail "summary check failed"; }
import json, sys
resumed, ref, epochs = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
job, commit = sys.argv[4], sys.argv[5]
errors = []
if not commit or resumed.get("git_commit") != commit:
    errors.append(f"resumed run: git_commit {resumed.get('git_commit')}, the binary's {commit}")
if resumed.get("resumed_from") is None:
    errors.append("resumed run: resumed_from is null")
if resumed.get("world_size") != 2:
    errors.append(f"resumed run: world_size {resumed.get('world_size')} (srun --mpi=pmi2 must make one world of 2)")
for name, s in (("resumed", resumed), ("reference", ref)):
    if s.get("epochs_completed") != epochs:
        errors.append(f"{name} run: epochs_completed {s.get('epochs_completed')}, expected {epochs}")
slurm = resumed.get("slurm") or {}
if slurm.get("restart_count") != 1 or str(slurm.get("job_id")) != job:
    errors.append(f"resumed run: summary.json slurm {slurm}, expected the job id and restart_count 1")
if ref.get("slurm") is not None:
    errors.append(f"reference run (no Slurm): summary.json slurm {ref.get('slurm')}, expected null")
if resumed.get("params_sha256") != ref.get("params_sha256"):
    errors.append(f"params_sha256 differs: resumed {resumed.get('params_sha256')} vs uninterrupted {ref.get('params_sha256')}")
for e in errors:
    print("FAIL: " + e, file=sys.stderr)
if not errors:
    print(f"resumed from step {resumed['resumed_from']}; params_sha256 {resumed['params_sha256'][:16]}... matches the uninterrupted run")
sys.exit(1 if errors else 0)
EOF
echo "PASS"
