#!/usr/bin/env bash
# jobs/launch.sh under mpiexec -n 2, with tests/slurm/stub_hpctrain.sh standing in for
# hpctrain (no Slurm needed): a crash is retried from the newest checkpoint, a run that
# keeps crashing gives up with 1 after R restarts, a bad config returns 2 at once,
# SIGUSR1/SIGTERM make the ranks checkpoint and the launcher return 75; the batch scripts
# stopped before their step starts start none.
#   bash tests/slurm/test_launch.sh     exit 0 pass, 1 fail, 77 skip
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
launch=$here/../../jobs/launch.sh
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec not found"; exit 77; }
w=$(mktemp -d "${TMPDIR:-/tmp}/ht-launch.XXXXXX") || exit 1
trap 'rm -rf "$w"' EXIT
export HPCTRAIN=$here/stub_hpctrain.sh STUB_STEP_SECONDS=0.02 STUB_STEPS=20 STUB_CKPT_EVERY=5
echo "run: {}" >"$w/config.yaml"
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
run() {  # run NAME [launch.sh args...]: output in $w/NAME.out, exit code in $rc
  local name=$1
  shift
  rc=0
  timeout 120 "$launch" "$@" >"$w/$name.out" 2>&1 || rc=$?
}
restarts() { grep -c "^launch.sh: restart " "$w/$1.out"; }
explain() { echo "----- $1 output" >&2; cat "$w/$1.out" >&2; }

# 1. A crash at step 12 (once): one restart, resumed from the step-10 checkpoint; the
#    first run keeps the caller's --resume, the restart uses --resume auto.
STUB_CRASH_AT_STEP=12 run once --max-restarts 2 --launcher "mpiexec -n 2" -- "$w/config.yaml" \
  --set "run.dir=$w/once" --resume never
if [[ $rc != 0 || $(restarts once) != 1 ]]; then
  fail "crash once: exit $rc, $(restarts once) restarts (expected 0, 1)"
  explain once
fi
grep -q '"resumed_from": 10' "$w/once/summary.json" 2>/dev/null ||
  fail "crash once: did not resume from the step-10 checkpoint: $(cat "$w/once/summary.json" 2>&1)"
[[ "$(sed -n 1p "$w/once/stub-args.txt")" == *"--resume never" &&
  "$(sed -n 2p "$w/once/stub-args.txt")" == *"--resume auto" ]] ||
  fail "crash once: expected --resume never, then --resume auto: $(cat "$w/once/stub-args.txt" 2>&1)"

# 1b. A run given --resume PATH that crashes before its own first checkpoint: the restart
#     resumes from PATH again (--resume auto:PATH), not from scratch (--resume auto did).
mkdir -p "$w/given"
echo 30 >"$w/given/step-30"
STUB_STEPS=40 STUB_CKPT_EVERY=50 STUB_CRASH_AT_STEP=32 run given --max-restarts 1 \
  --launcher "mpiexec -n 2" -- "$w/config.yaml" --set "run.dir=$w/fine" --resume "$w/given/step-30"
if [[ $rc != 0 ]] || ! grep -q '"resumed_from": 30' "$w/fine/summary.json" 2>/dev/null ||
  [[ "$(sed -n 2p "$w/fine/stub-args.txt")" != *"--resume auto:$w/given/step-30" ]]; then
  fail "crash before the run's own checkpoint: exit $rc, $(cat "$w/fine/summary.json" 2>&1)"
  explain given
fi

# 2. Crashing every time: R restarts, then exit 1.
STUB_CRASH_AT_STEP=12 STUB_CRASH_ALWAYS=1 run always --max-restarts 2 --launcher "mpiexec -n 2" \
  -- "$w/config.yaml" --set "run.dir=$w/always"
if [[ $rc != 1 || $(restarts always) != 2 ]] || ! grep -q "giving up after 2 restart" "$w/always.out"; then
  fail "crash always: exit $rc, $(restarts always) restarts (expected 1, 2)"
  explain always
fi

# 3. A bad config: exit 2 at once, no restart.
run bad --max-restarts 3 --launcher "mpiexec -n 2" -- "$w/missing.yaml" --set "run.dir=$w/bad"
if [[ $rc != 2 || $(restarts bad) != 0 ]]; then
  fail "bad config: exit $rc, $(restarts bad) restarts (expected 2, 0)"
  explain bad
fi

# 4. SIGUSR1 and SIGTERM to the launcher: checkpoint, exit 75, no restart.
for sig in USR1 TERM; do
  STUB_STEPS=100000 STUB_STEP_SECONDS=0.05 \
    "$launch" --launcher "mpiexec -n 2" -- "$w/config.yaml" --set "run.dir=$w/$sig" >"$w/$sig.out" 2>&1 &
  pid=$!
  if ! timeout 30 bash -c "until [[ -e '$w/$sig/checkpoints/step-5' ]]; do sleep 0.1; done"; then
    fail "SIG$sig: no checkpoint within 30 s"
  fi
  kill "-$sig" "$pid"
  rc=0
  timeout 30 tail --pid="$pid" -f /dev/null || fail "SIG$sig: launcher still running 30 s after the signal"
  wait "$pid" || rc=$?
  if [[ $rc != 75 || $(restarts "$sig") != 0 ]] || ! grep -q "exiting 75" "$w/$sig.out"; then
    fail "SIG$sig: exit $rc, $(restarts "$sig") restarts (expected 75 after a checkpoint, 0)"
    explain "$sig"
  fi
done

# 5. hydra's mpiexec sometimes reports 0 after forwarding a signal though every rank
#    exited 75: the STOPPED marker in run.dir (from --set, or from the config) makes it 75.
printf 'run:\n  name: x\n  dir: "%s"   # a comment\n' "$w/from-config" >"$w/dir-config.yaml"
for case in "set $w/config.yaml --set run.dir=$w/lost" "config $w/dir-config.yaml"; do
  read -r name cfg args <<<"$case"
  # shellcheck disable=SC2086  # args: no blanks in the test paths
  STUB_LOSE_75=1 STUB_STEPS=100000 STUB_STEP_SECONDS=0.05 \
    "$launch" --launcher "mpiexec -n 2" -- "$cfg" $args >"$w/lost-$name.out" 2>&1 &
  pid=$!
  dir=$w/lost
  [[ $name == config ]] && dir=$w/from-config
  timeout 30 bash -c "until [[ -e '$dir/checkpoints/step-5' ]]; do sleep 0.1; done" ||
    fail "lost 75 ($name): no checkpoint in $dir within 30 s"
  kill -USR1 "$pid"
  rc=0
  wait "$pid" || rc=$?
  if [[ $rc != 75 ]] || ! grep -q "STOPPED) though the launcher reported 0" "$w/lost-$name.out"; then
    fail "lost 75 ($name): exit $rc (expected 75 from the STOPPED marker)"
    explain "lost-$name"
  fi
done

# 6. Usage errors are exit 2; --help is the usage on stdout, exit 0 (it was 2, on stderr).
run usage --max-restarts x -- "$w/config.yaml"
[[ $rc == 2 ]] || fail "--max-restarts x: exit $rc (expected 2)"
# A binary that is not there: no run, no restart (each one failed, then exit 1).
run nobinary --hpctrain "$w/nowhere/hpctrain" --launcher "mpiexec -n 2" -- "$w/config.yaml"
if [[ $rc != 2 || $(restarts nobinary) != 0 ]] || ! grep -q "no such program" "$w/nobinary.out"; then
  fail "a missing binary: exit $rc, $(restarts nobinary) restarts (expected 2, 0)"
  explain nobinary
fi
rc=0
help=$(bash "$here/../../jobs/launch.sh" --help 2>/dev/null) || rc=$?
[[ $rc == 0 && $help == *"--max-restarts"* ]] || fail "launch.sh --help: exit $rc"

# 7. A count with a leading zero is decimal (09 was an octal error that never gave up).
run octal --max-restarts 09 --launcher env --hpctrain false -- "$w/config.yaml"
if [[ $rc != 1 || $(restarts octal) != 9 ]]; then
  fail "--max-restarts 09: exit $rc, $(restarts octal) restarts (expected 1, 9)"
  explain octal
fi

# 8. The batch scripts, outside Slurm: a stop that arrives before the step starts (here
#    while the script asks scontrol where its original is) starts no step; the job exits
#    75 (HPCTRAIN_REQUEUE=0, study.sbatch too: it requeued itself). It used to end the shell.
fake=$w/fake-bin
mkdir -p "$fake"
cat >"$fake/scontrol" <<'EOF'
#!/bin/bash
[[ $1 == show ]] && { sleep 2; exit 1; }
echo "scontrol $*" >>"$FAKE_LOG"
EOF
cat >"$fake/srun" <<'EOF'
#!/bin/bash
echo "$(basename "$0") $*" >>"$FAKE_LOG"
EOF
cp "$fake/srun" "$fake/hpctrain"
chmod +x "$fake"/*
echo "config.yaml" >"$w/sweep.txt"
jobs_dir=$here/../../jobs
for case in "train_single_node config.yaml 75" "train_multi_node config.yaml 75" \
  "sweep_array $w/sweep.txt 75" "study study.yaml 75"; do
  read -r name arg want <<<"$case"
  : >"$w/fake-$name.log"
  PATH=$fake:$PATH FAKE_LOG=$w/fake-$name.log HPCTRAIN=$fake/hpctrain HPCTRAIN_ROOT=$w \
    HPCTRAIN_REQUEUE=0 SLURM_JOB_ID=42 SLURM_JOB_NODELIST=n1 SLURM_ARRAY_JOB_ID=42 SLURM_ARRAY_TASK_ID=0 \
    bash "$jobs_dir/$name.sbatch" "$arg" >"$w/early-$name.out" 2>&1 &
  pid=$!
  sleep 0.5
  kill -USR1 "$pid"
  rc=0
  wait "$pid" || rc=$?
  ran=$(grep -v '^scontrol requeue 42$' "$w/fake-$name.log")
  requeued=$(grep -c '^scontrol requeue 42$' "$w/fake-$name.log")
  if [[ $rc != "$want" || -n "$ran" || $requeued != $((want == 0)) ]] ||
    ! grep -q "stopping before the" "$w/early-$name.out"; then
    fail "$name.sbatch, stopped before its step: exit $rc (expected $want), ran '$ran', requeued $requeued"
    explain "early-$name"
  fi
done

# 9. The batch scripts' arguments: a --resume is for the first run only (a requeued job
#    passed --resume never again and failed, or went back to a PATH at every requeue); a
#    sweep task's run.dir is quoted for YAML (" #" began a comment: the tasks shared one)
#    and holds its checkpoints; HPCTRAIN_MAX_REQUEUES must be a whole number.
quick=$w/quick-bin
mkdir -p "$quick"
cp "$fake/srun" "$fake/hpctrain" "$quick/"
cat >"$quick/scontrol" <<'EOF'
#!/bin/bash
echo "scontrol $*" >>"$FAKE_LOG"
EOF
chmod +x "$quick"/*
batch() {  # LOG RESTARTS SCRIPT ARGS...: runs a batch script with the stand-ins
  local log=$1 restarts=$2 script=$3
  shift 3
  : >"$log"
  PATH=$quick:$PATH FAKE_LOG=$log HPCTRAIN=$quick/hpctrain HPCTRAIN_ROOT=${HPCTRAIN_ROOT:-$w} SLURM_JOB_ID=42 \
    SLURM_JOB_NODELIST=n1 SLURM_RESTART_COUNT=$restarts SLURM_ARRAY_JOB_ID=42 \
    SLURM_ARRAY_TASK_ID=0 bash "$jobs_dir/$script.sbatch" "$@" >"$log.out" 2>&1
}
for restarts in 0 1; do
  rc=0
  batch "$w/resume-$restarts.log" "$restarts" train_single_node config.yaml --resume never \
    --set x=1 --resume=never || rc=$?
  n=$(grep -o -- '--resume[= ]never' "$w/resume-$restarts.log" | wc -l)
  if [[ $rc != 0 || $n != $((restarts == 0 ? 2 : 0)) ]] || ! grep -q -- '--set x=1' "$w/resume-$restarts.log"; then
    fail "train_single_node.sbatch at restart $restarts: exit $rc, --resume never passed $n time(s)"
    cat "$w/resume-$restarts.log"
  fi
done
# A PATH given: a requeued run continues from its own newest checkpoint, else from PATH.
for restarts in 0 1; do
  batch "$w/path-$restarts.log" "$restarts" train_single_node config.yaml --resume "a b.h5" \
    --resume=c.h5 || true
  want=("--resume a b.h5" "--resume=c.h5")
  ((restarts)) && want=("--resume auto:a b.h5" "--resume=auto:c.h5")
  for x in "${want[@]}"; do
    grep -qF -- "$x" "$w/path-$restarts.log" ||
      fail "train_single_node.sbatch at restart $restarts: no '$x' in $(cat "$w/path-$restarts.log")"
  done
done
printf 'config.yaml --set optimizer.lr=0.1\n' >"$w/sweep1.txt"
rc=0
HPCTRAIN_SWEEP_DIR="$w/sweep #1" batch "$w/sweep.log" 0 sweep_array "$w/sweep1.txt" || rc=$?
if [[ $rc != 0 ]] || ! grep -qF -- "--set run.dir=\"$w/sweep #1/0\" --set checkpoint.dir=\"\"" "$w/sweep.log"; then
  fail "sweep_array.sbatch with ' #' in its folder: exit $rc"
  cat "$w/sweep.log"
fi
rc=0
HPCTRAIN_ROOT=$w/nowhere batch "$w/root.log" 0 train_single_node config.yaml || rc=$?
[[ $rc == 2 ]] || fail "a missing HPCTRAIN_ROOT: exit $rc (expected 2)"
rc=0
HPCTRAIN_MAX_REQUEUES=ten batch "$w/max.log" 0 train_single_node config.yaml || rc=$?
if [[ $rc != 2 ]] || ! grep -q "HPCTRAIN_MAX_REQUEUES: expected a whole number" "$w/max.log.out"; then
  fail "HPCTRAIN_MAX_REQUEUES=ten: exit $rc (expected 2)"
fi

# 10. The source tree of the script Slurm ran, with a space in its path: scontrol's
#     Command= holds the path and the arguments unquoted; the path was cut at its space.
tree="$w/my tree"
mkdir -p "$tree/jobs" "$tree/build" "$w/tree-bin"
cp "$jobs_dir/train_single_node.sbatch" "$tree/jobs/"
cp "$fake/srun" "$tree/build/hpctrain"
cp "$fake/srun" "$w/tree-bin/srun"
# shellcheck disable=SC2016  # $1 is the stand-in's own argument
printf '#!/bin/bash\n[[ $1 == show ]] && echo "   Command=%s/jobs/train_single_node.sbatch config.yaml --set a=b"\n' \
  "$tree" >"$w/tree-bin/scontrol"
chmod +x "$w/tree-bin"/* "$tree/build/hpctrain"
: >"$w/tree.log"
rc=0
env -u HPCTRAIN PATH="$w/tree-bin:/usr/bin:/bin" FAKE_LOG="$w/tree.log" HPCTRAIN_ROOT="$w" \
  SLURM_JOB_ID=42 SLURM_JOB_NODELIST=n1 bash "$tree/jobs/train_single_node.sbatch" config.yaml \
  --set a=b >"$w/tree.out" 2>&1 || rc=$?
if [[ $rc != 0 ]] || ! grep -qF "with $tree/build/hpctrain" "$w/tree.out"; then
  fail "a source tree with a space: exit $rc"
  cat "$w/tree.out"
fi

# 11. study.sbatch, a warning just after the driver started: passed on once the driver has
#     had 2 s to block it (it died of SIGUSR1, 138, and was not requeued): it stops (75) and
#     the job requeues itself (the script then ends with 0). The stand-in
#     driver, like hpctrain, dies of a USR1 in its first moment and stops (75) on a later one.
cat >"$quick/driver" <<'EOF'
#!/bin/bash
sleep 0.6
trap 'exit 75' USR1
for _ in $(seq 100); do sleep 0.1; done
EOF
chmod +x "$quick/driver"
: >"$w/driver.log"
PATH=$quick:$PATH FAKE_LOG=$w/driver.log HPCTRAIN=$quick/driver HPCTRAIN_ROOT=$w SLURM_JOB_ID=42 \
  SLURM_JOB_NODELIST=n1 bash "$jobs_dir/study.sbatch" study.yaml >"$w/driver.out" 2>&1 &
pid=$!
timeout 10 bash -c "until pgrep -f '$quick/driver' >/dev/null; do sleep 0.05; done"
kill -USR1 "$pid"
rc=0
wait "$pid" || rc=$?
if [[ $rc != 0 ]] || ! grep -q '^scontrol requeue 42$' "$w/driver.log"; then
  fail "study.sbatch, a warning as its driver starts: exit $rc (expected 0, requeued)"
  cat "$w/driver.out" >&2
fi

if ((failures > 0)); then
  echo "FAIL: $failures check(s) failed" >&2
  exit 1
fi
echo "PASS"
