#!/usr/bin/env bash
# CPU training throughput of hpctrain against PyTorch on the same model, same ranks
# and threads, same per-rank batch and same samples per epoch, in one command:
#
#   bench/train_throughput.sh --model mlp|cnn|lstm [--build DIR] [--data DIR] [--reps N] ...
#   BUILD=build DATA=data/fashion-mnist REPS=5 EPOCHS=2 bench/train_throughput.sh --model cnn
#
# Runs REPS interleaved repetitions of
#   (a) mpiexec -n RANKS BUILD/hpctrain train CONFIG --set device=cpu ... (training
#       set only, no val/test, constant learning rate), samples_per_second from
#       summary.json;
#   (b) bench/pytorch_train.py --model MODEL with the same ranks, threads, batch and
#       epochs (DDP over gloo when RANKS > 1, one plain process when RANKS = 1);
# alternating which of the two goes first, then prints a table with the medians
# and their ratio, and writes OUT. Both sides time the training loop only; the
# slowest rank sets the time.
#
# Per model (the flags and variables below override RANKS, THREADS and OUT):
#   mlp: configs/fashion_mnist_mlp.yaml, 2 ranks x 1 thread, target ratio 3.0,
#        OUT bench/results/mlp_throughput_cpu.json
#   cnn: configs/fashion_mnist_cnn.yaml, 1 rank x 2 threads (compares the convolution
#        engines), target ratio 1.0, OUT bench/results/cnn_throughput_cpu.json
#   lstm: configs/fashion_mnist_lstm.yaml (LSTM 128 over the image rows), 1 rank x 2
#        threads, target ratio 1.0, OUT bench/results/lstm_throughput_cpu.json
# The per-rank batch is 64, the configs'.
#
# Settings (flag or environment variable; a relative path given is taken from the
# current directory, the default paths are inside the repository):
#   --model  MODEL    mlp, cnn or lstm (required)
#   --build  BUILD    build directory holding hpctrain          (default: build)
#   --data   DATA     directory with train.h5 from `hpctrain-data fashion-mnist --out DATA`
#                                                               (default: data/fashion-mnist)
#   --reps   REPS     repetitions of each side                  (default: 5)
#   --epochs EPOCHS   epochs per run                            (default: 2)
#   --optimizer OPT   sgd (momentum 0.9, lr 0.05) or adamw (lr 0.002, weight decay
#                     0.01), both sides                         (default: sgd)
#   --threads THREADS compute threads per rank, both sides      (default: per model)
#   --ranks  RANKS    ranks, both sides                         (default: per model)
#   --out    OUT      result file       (default: per model; adamw adds _adamw to its name)
#   PYTHON            Python with torch + h5py (default: the first of python3,
#                     /usr/bin/python3 that imports both)
#   MPIEXEC           MPI launcher (default: mpiexec)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
INVOCATION="$0${*:+ $*}"

die() { echo "train_throughput.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

MODEL=${MODEL:-}
BUILD=${BUILD:-$ROOT/build}
DATA=${DATA:-$ROOT/data/fashion-mnist}
REPS=${REPS:-5}
EPOCHS=${EPOCHS:-2}
THREADS=${THREADS:-}
RANKS=${RANKS:-}
OUT=${OUT:-}
OPTIMIZER=${OPTIMIZER:-sgd}
MPIEXEC=${MPIEXEC:-mpiexec}
BATCH=64

while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --model|--build|--data|--reps|--epochs|--threads|--ranks|--out|--optimizer)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case "$1" in
        --model) MODEL=$2 ;; --build) BUILD=$2 ;; --data) DATA=$2 ;; --reps) REPS=$2 ;;
        --epochs) EPOCHS=$2 ;; --threads) THREADS=$2 ;; --ranks) RANKS=$2 ;; --out) OUT=$2 ;;
        --optimizer) OPTIMIZER=$2 ;;
      esac
      shift 2 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$OPTIMIZER" in
  sgd) OPT_SUFFIX= ;;
  adamw) OPT_SUFFIX=_adamw ;;
  *) die "--optimizer must be sgd or adamw, got '$OPTIMIZER'" ;;
esac
# Model defaults, for what no flag or variable set.
case "$MODEL" in
  mlp) CONFIG_REL=configs/fashion_mnist_mlp.yaml; TARGET=3.0
       : "${RANKS:=2}" "${THREADS:=1}" "${OUT:=$ROOT/bench/results/mlp${OPT_SUFFIX}_throughput_cpu.json}" ;;
  cnn) CONFIG_REL=configs/fashion_mnist_cnn.yaml; TARGET=1.0
       : "${RANKS:=1}" "${THREADS:=2}" "${OUT:=$ROOT/bench/results/cnn${OPT_SUFFIX}_throughput_cpu.json}" ;;
  lstm) CONFIG_REL=configs/fashion_mnist_lstm.yaml; TARGET=1.0
       : "${RANKS:=1}" "${THREADS:=2}" "${OUT:=$ROOT/bench/results/lstm${OPT_SUFFIX}_throughput_cpu.json}" ;;
  '') die "--model mlp|cnn|lstm is required (see --help)" ;;
  *) die "--model must be mlp, cnn or lstm, got '$MODEL'" ;;
esac

for v in REPS EPOCHS THREADS RANKS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
BUILD=$(abspath "$BUILD"); DATA=$(abspath "$DATA"); OUT=$(abspath "$OUT")

# --- Preconditions, each with the fix in its message. ---
HPCTRAIN=$BUILD/hpctrain
[[ -x $HPCTRAIN ]] ||
  die "no hpctrain binary at $HPCTRAIN: build it (cmake -S . -B build && cmake --build build) or pass --build DIR"
TRAIN_H5=$DATA/train.h5
[[ -f $TRAIN_H5 ]] ||
  die "no training data at $TRAIN_H5: create it with '$BUILD/hpctrain-data fashion-mnist --out $DATA' or pass --data DIR"
command -v "$MPIEXEC" >/dev/null || die "no MPI launcher '$MPIEXEC' on PATH (set MPIEXEC)"
CONFIG=$ROOT/$CONFIG_REL
PT_SCRIPT=$ROOT/bench/pytorch_train.py
[[ -f $CONFIG && -f $PT_SCRIPT ]] || die "$CONFIG or $PT_SCRIPT is missing"

has_torch() { "$1" -c 'import torch, torch.distributed, h5py' >/dev/null 2>&1; }
if [[ -n ${PYTHON:-} ]]; then
  has_torch "$PYTHON" || die "PYTHON=$PYTHON cannot import torch and h5py"
else
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && has_torch "$p"; then PYTHON=$p; break; fi
  done
  [[ -n ${PYTHON:-} ]] ||
    die "no Python with torch and h5py (Debian: apt-get install python3-torch python3-h5py), or set PYTHON"
fi
if ((RANKS > 1)); then
  "$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    die "$PYTHON: torch has no gloo backend"
fi

# The two sides' arguments. hpctrain: CPU, training set only, constant learning
# rate as PyTorch's (the cnn config's cosine schedule costs nothing, but both sides
# run the same recipe), no progress lines.
HPC_SETTINGS=(--set device=cpu --set data.train="$TRAIN_H5" --set data.val= --set data.test=
  --set train.epochs="$EPOCHS" --set train.batch_size="$BATCH"
  --set optimizer.schedule.type=constant --set run.threads="$THREADS"
  --set train.progress_seconds=0)
PT_ARGS=(--model "$MODEL" --data "$TRAIN_H5" --epochs "$EPOCHS" --batch "$BATCH"
  --threads "$THREADS" --world "$RANKS")
if [[ $OPTIMIZER == adamw ]]; then
  HPC_SETTINGS+=(--set optimizer.name=adamw --set optimizer.lr=0.002
    --set optimizer.weight_decay=0.01)
  PT_ARGS+=(--optimizer adamw --lr 0.002 --weight-decay 0.01)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/train_throughput.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RUNS=$WORK/runs.jsonl
: >"$RUNS"

run_hpctrain() {  # $1: repetition
  local dir=$WORK/hpctrain_$1 log=$WORK/hpctrain_$1.log
  if ! "$MPIEXEC" -n "$RANKS" "$HPCTRAIN" train "$CONFIG" \
      "${HPC_SETTINGS[@]}" --set run.dir="$dir" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "hpctrain run $1 failed (log above)"
  fi
  [[ -f $dir/summary.json ]] || die "hpctrain run $1 wrote no $dir/summary.json"
  "$PYTHON" - "$dir/summary.json" "$1" >>"$RUNS" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"side": "hpctrain", "rep": int(sys.argv[2]),
                  "samples_per_second": s["samples_per_second"],
                  "time_train_s": s["time_train_s"],
                  "samples": round(s["samples_per_second"] * s["time_train_s"]),
                  "param_count": s["param_count"],
                  "comm_fraction": s["comm_fraction"],
                  "data_wait_fraction": s["data_wait_fraction"],
                  "train_loss": s["train_loss"],
                  "world_size": s["world_size"], "threads_per_rank": s["threads_per_rank"],
                  "global_batch": s["global_batch"]}))
EOF
}

run_pytorch() {  # $1: repetition
  local log=$WORK/pytorch_$1.log line
  if ! "$PYTHON" "$PT_SCRIPT" "${PT_ARGS[@]}" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "PyTorch run $1 failed (log above)"
  fi
  line=$(grep '^{' "$log" | tail -n 1) || die "PyTorch run $1 printed no JSON line: $(tail -n 5 "$log")"
  "$PYTHON" - "$line" "$1" >>"$RUNS" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
r.update({"side": "pytorch", "rep": int(sys.argv[2])})
print(json.dumps(r))
EOF
}

# CPU accounting, to tell whether something else ran on the machine meanwhile:
# "busy steal children wall" in clock ticks / seconds, where busy is the machine's
# non-idle time (/proc/stat) and children the CPU time of this script's finished
# children (the benchmark runs themselves, /proc/$$/stat cutime + cstime).
cpu_snapshot() {
  "$PYTHON" - "$$" <<'EOF'
import sys, time
f = open("/proc/stat").readline().split()[1:]
user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in f[:8])
st = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()
print(user + nice + system + irq + softirq + steal, steal, int(st[13]) + int(st[14]), time.time())
EOF
}
CPU_START=$(cpu_snapshot) || CPU_START=
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) || LOAD_START=

if ((RANKS > 1)); then PT_KIND="PyTorch DDP gloo"; else PT_KIND="PyTorch"; fi
echo "$MODEL: hpctrain ($HPCTRAIN, $RANKS rank(s) x $THREADS thread(s)) vs $PT_KIND ($PYTHON):"
echo "  $EPOCHS epoch(s) of $TRAIN_H5, batch $BATCH per rank, $REPS repetitions, interleaved"
for ((r = 1; r <= REPS; ++r)); do
  if ((r % 2)); then run_hpctrain "$r"; run_pytorch "$r"; else run_pytorch "$r"; run_hpctrain "$r"; fi
  echo "  repetition $r/$REPS done"
done

CPU_END=$(cpu_snapshot) || CPU_END=
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) || LOAD_END=
CLK_TCK=$(getconf CLK_TCK 2>/dev/null) || CLK_TCK=100

# --- Medians, table, result file. ---
mkdir -p "$(dirname "$OUT")"
CPU_MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | sed -n 1p) || CPU_MODEL=
NPROC=$(nproc)
# First line of `mpiexec --version` plus its first "Version:" line (MPICH's Hydra).
MPI_VERSION=$("$MPIEXEC" --version 2>&1 | awk 'NF { $1 = $1 } NR == 1 { v = $0 }
  /^Version:/ && !seen { v = v " " $0; seen = 1 } END { print v }') || MPI_VERSION=
# The GEMM kernels OpenBLAS runs (OPENBLAS_CORETYPE in the environment applies to both sides).
BLAS=$("$HPCTRAIN" --version 2>/dev/null | sed -n 's/^BLAS: //p') || BLAS=
GIT_COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null) || GIT_COMMIT=
GIT_DIRTY=false
[[ -n $GIT_COMMIT && -n $(git -C "$ROOT" status --porcelain 2>/dev/null) ]] && GIT_DIRTY=true
COMMAND="MODEL=$MODEL OPTIMIZER=$OPTIMIZER BUILD=$BUILD DATA=$DATA REPS=$REPS EPOCHS=$EPOCHS THREADS=$THREADS"
COMMAND+=" RANKS=$RANKS $INVOCATION"
HPC_CMD="$MPIEXEC -n $RANKS $HPCTRAIN train $CONFIG_REL ${HPC_SETTINGS[*]} --set run.dir=TMP"
PT_CMD="$PYTHON bench/pytorch_train.py ${PT_ARGS[*]}"
# The record names paths inside the repository relative to its root, as they are run from.
COMMAND=${COMMAND//"$ROOT/"/} HPC_CMD=${HPC_CMD//"$ROOT/"/} PT_CMD=${PT_CMD//"$ROOT/"/}

export CPU_START CPU_END LOAD_START LOAD_END CLK_TCK
export BLAS RUNS OUT TARGET CPU_MODEL NPROC MPI_VERSION GIT_COMMIT GIT_DIRTY COMMAND HPC_CMD PT_CMD \
  MODEL OPTIMIZER CONFIG_REL PT_KIND RANKS THREADS EPOCHS BATCH REPS
"$PYTHON" - <<'EOF'
import datetime, json, os, platform, statistics

env = os.environ
runs = [json.loads(l) for l in open(env["RUNS"]) if l.strip()]
h = [r for r in runs if r["side"] == "hpctrain"]
p = [r for r in runs if r["side"] == "pytorch"]
ranks, epochs, batch = int(env["RANKS"]), int(env["EPOCHS"]), int(env["BATCH"])
model, pt_kind = env["MODEL"], env["PT_KIND"]

# Both sides must have trained the same model (parameter count) on the same samples
# (steps * batch * ranks * epochs).
for key, what in (("param_count", "parameter counts"), ("samples", "sample counts")):
    want = {r[key] for r in p}
    got = {r[key] for r in h}
    if len(want) != 1 or got != want:
        raise SystemExit(f"train_throughput.sh: the two sides have different {what}: "
                         f"hpctrain {sorted(got)}, PyTorch {sorted(want)}")

hs = [r["samples_per_second"] for r in h]
ps = [r["samples_per_second"] for r in p]
mh, mp = statistics.median(hs), statistics.median(ps)
ratio = mh / mp
target = float(env["TARGET"])
import torch  # version only

def spread(xs):
    m = statistics.median(xs)
    return {"min": min(xs), "max": max(xs), "median": m,
            "rel_spread": (max(xs) - min(xs)) / m if m else None}

# Machine CPU time not spent by this benchmark's own processes, as a fraction of
# all cores over the wall time: near 0 on a quiet machine.
contention = None
if env.get("CPU_START") and env.get("CPU_END"):
    b0, s0, c0, w0 = (float(x) for x in env["CPU_START"].split())
    b1, s1, c1, w1 = (float(x) for x in env["CPU_END"].split())
    tck, ncpu, wall = float(env["CLK_TCK"]), int(env["NPROC"]), w1 - w0
    other = max(0.0, (b1 - b0) - (c1 - c0)) / tck
    contention = {
        "wall_s": wall,
        "benchmark_cpu_s": (c1 - c0) / tck,
        "other_cpu_s": other,
        "other_cpu_fraction": other / (wall * ncpu) if wall > 0 else None,
        "steal_s": (s1 - s0) / tck,
        "loadavg_start": env.get("LOAD_START"),
        "loadavg_end": env.get("LOAD_END"),
        "note": "other_cpu_s: machine busy time (/proc/stat) less the CPU time of the "
                "benchmark's processes; a large value means something else competed for the cores",
    }

architecture = {
    "mlp": "MLP 784-192-10",
    "cnn": "CNN conv3x3(32)-pool-conv3x3(64)-pool-dense128-10",
    "lstm": "LSTM 128 over 28 rows of 28 pixels, last step, dense 10",
}[model]
optimizer_text = {"sgd": "SGD momentum", "adamw": "AdamW"}[env["OPTIMIZER"]]
suffix = "" if env["OPTIMIZER"] == "sgd" else "_" + env["OPTIMIZER"]
result = {
    "benchmark": f"{model}{suffix}_throughput_cpu",
    "description": f"CPU training samples/s, hpctrain ({ranks} rank(s)"
                   f"{', ring all-reduce' if ranks > 1 else ''}) vs {pt_kind}, same {architecture}, "
                   f"{optimizer_text}, constant learning rate, same per-rank batch and samples "
                   "per epoch; training loop only, slowest rank",
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "host": {"cpu_model": env["CPU_MODEL"], "nproc": int(env["NPROC"]),
             "kernel": platform.release(), "machine": platform.machine()},
    "software": {"hpctrain_git_commit": env["GIT_COMMIT"] or None,
                 "hpctrain_worktree_dirty": env["GIT_DIRTY"] == "true",
                 "mpi": env["MPI_VERSION"] or None, "torch": torch.__version__,
                 "blas": env["BLAS"] or None,
                 "openblas_coretype_env": env.get("OPENBLAS_CORETYPE"),
                 "python": platform.python_version()},
    "command": env["COMMAND"],
    "commands": {"hpctrain": env["HPC_CMD"], "pytorch": env["PT_CMD"]},
    "setup": {"model": model, "optimizer": env["OPTIMIZER"], "config": env["CONFIG_REL"],
              "param_count": p[0]["param_count"], "ranks": ranks, "threads_per_rank": int(env["THREADS"]),
              "batch_per_rank": batch, "global_batch": batch * ranks, "epochs": epochs,
              "steps_per_epoch_per_rank": p[0]["steps_per_epoch"],
              "samples_per_run": p[0]["samples"], "train_rows": p[0]["train_rows"],
              "repetitions": int(env["REPS"]),
              "order": "interleaved; odd repetitions run hpctrain first, even ones PyTorch first"},
    "contention": contention,
    "runs": [{"rep": a["rep"],
              "hpctrain_samples_per_second": a["samples_per_second"],
              "pytorch_samples_per_second": b["samples_per_second"],
              "ratio": a["samples_per_second"] / b["samples_per_second"],
              "hpctrain": a, "pytorch": b}
             for a, b in zip(sorted(h, key=lambda r: r["rep"]), sorted(p, key=lambda r: r["rep"]))],
    "hpctrain": spread(hs),
    "pytorch": spread(ps),
    "median_samples_per_second": {"hpctrain": mh, "pytorch": mp},
    "ratio": ratio,
    "target_ratio": target,
    "target_met": ratio >= target,
}
out = env["OUT"]
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
os.replace(tmp, out)

print()
print(f"{'rep':>3}  {'hpctrain samples/s':>18}  {'PyTorch samples/s':>17}  {'ratio':>6}")
for r in result["runs"]:
    print(f"{r['rep']:>3}  {r['hpctrain_samples_per_second']:>18.0f}  "
          f"{r['pytorch_samples_per_second']:>17.0f}  {r['ratio']:>6.2f}")
print(f"{'med':>3}  {mh:>18.0f}  {mp:>17.0f}  {ratio:>6.2f}")
print(f"\nratio of medians {ratio:.2f} (target >= {target:.1f}: "
      f"{'met' if ratio >= target else 'NOT met'}); "
      f"spread (max-min)/median: hpctrain {result['hpctrain']['rel_spread']:.0%}, "
      f"PyTorch {result['pytorch']['rel_spread']:.0%}")
if contention and contention["other_cpu_fraction"] is not None:
    frac = contention["other_cpu_fraction"]
    print(f"other processes used {frac:.0%} of the machine's CPU during the benchmark"
          + (" -- WARNING: the cores were shared, figures are unreliable" if frac > 0.05 else ""))
print(f"wrote {out}")
EOF
