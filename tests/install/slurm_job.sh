#!/usr/bin/env bash
# A job script of the installation (install_prefix.sh, moved), without the source tree:
# `hpctrain init` copies train_single_node.sbatch and the MLP config out of
# PREFIX/share/hpctrain into a directory of the test cluster, hpctrain is on PATH only
# (HPCTRAIN unset, as after `module load hpctrain`), and the script, submitted with
# sbatch from that directory, trains one epoch on 2 ranks.
#   bash tests/install/slurm_job.sh PREFIX DATA SOURCE BUILD   exit 0 pass, 1 fail, 77 skip
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/slurm_cluster.sh
source "$here/../slurm/slurm_cluster.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
terminal='COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED'
b=$(cd "$1" && pwd) || fail "no installation $1"
data=$(cd "$2" && pwd) || fail "no data directory $2"
src=$(cd "$3" && pwd)
build=$(cd "$4" && pwd)

slurm_cluster_start || exit $?
work=$SLURM_TEST_DIR/user
for tree in "$src" "$build"; do
  [[ "$work/" != "$tree/"* ]] || fail "$work is inside $tree: set TMPDIR elsewhere"
done
unset HPCTRAIN
export PATH=$b/bin:$PATH
hpctrain init "$work" || fail "hpctrain init $work"
cd "$work" || exit 1
mkdir -p data && ln -s "$data" data/fashion-mnist

echo "== sbatch train_single_node.sbatch fashion_mnist_mlp.yaml (from $work)"
job=$(sbatch --parsable --ntasks=2 --cpus-per-task=1 -o job.out train_single_node.sbatch \
  fashion_mnist_mlp.yaml --set train.epochs=1 --set device=cpu) || fail "sbatch refused the job script"
state=$(slurm_wait_job_state "$job" "$terminal" 180) || true
cat job.out
[[ "$state" == COMPLETED ]] || fail "job $job ended $state"
grep -q "^== job $job restart 0 .* with $b/bin/hpctrain$" job.out ||
  fail "the job did not run the installed hpctrain from PATH"
JOB=$job /usr/bin/python3 - <<'PY' || fail "summary.json of the job's run"
import json, os
s = json.load(open("runs/fashion_mnist_mlp/summary.json"))
assert s["world_size"] == 2 and s["epochs_completed"] == 1, s
assert s["slurm"] and s["slurm"]["job_id"] == int(os.environ["JOB"]), s["slurm"]
assert s["slurm"].get("restart_count", 0) == 0 and s["git_commit"] and s["hosts"], s
print("trained under Slurm: 2 ranks, test accuracy", s["test_accuracy"])
PY
echo PASS
