# shellcheck shell=bash
# A throw-away Slurm cluster for tests, started inside the test itself: munged with its
# own key, slurmctld and one slurmd per node in the foreground as root, every file
# (config, state, spool, logs, munge socket) under one temporary directory, free ports.
# Source it, then:
#   slurm_cluster_start || exit $?    # 77 + "SKIP: ..." when Slurm cannot run here
#   sbatch ... ; slurm_wait_job_state JOBID 'COMPLETED|FAILED' 60
# slurm_cluster_start exports SLURM_CONF (so sbatch, squeue, scontrol talk to this
# cluster) and installs an EXIT trap that stops everything and prints the daemon logs
# when the test fails. A test with its own cleanup calls slurm_cluster_stop from its trap.
# SLURM_TEST_NODES=N (default 1) starts N nodes on this host, node1..nodeN, one slurmd
# each on its own port (Slurm's multiple-slurmd layout); a single node is named after
# `hostname -s`. SLURM_TEST_CPUS sets the CPUs per node (default nproc, at least 2).
# SLURM_TEST_KEEP=1 keeps the directory for a post-mortem.
#
# slurm.conf choices:
#   ProctrackType=proctrack/linuxproc, TaskPlugin=task/none: containers have no
#     writable cgroup hierarchy for Slurm; linuxproc tracks tasks by parent pid.
#   SelectType=select/cons_tres + CR_CPU: GPUs as GRES, CPUs as the consumable.
#   Gres=gpu:N on fake devices (character devices made with mknod, regular files where
#     that is not allowed): the jobs/ scripts ask for --gpus-per-task=1 and are
#     submitted unchanged; hpctrain (CPU build) ignores the GPUs.
#   SlurmdParameters=config_overrides: a node has the CPUs we configure, whatever the
#     hardware reports, so a 1-core CI runner still takes a 2-rank job.
#   MpiDefault=none (Debian's default): the job scripts must ask for --mpi=pmi2
#     themselves, and the tests catch them when they do not.
#   AuthInfo cred_expire=10: a requeued job waits cred_expire+1 s before it may start
#     again (121 s by default); SchedulerParameters=sched_interval=1 then starts it.
#   JobRequeue=1, KillWait=5, MinJobAge=600 (finished jobs stay visible to
#     `scontrol show job`: there is no slurmdbd, hence no sacct).

slurm_log() { echo "slurm_cluster: $*" >&2; }

# Prints N free TCP ports on 127.0.0.1: _slurm_free_ports N
_slurm_free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Runs CMD until it succeeds or TIMEOUT seconds pass: slurm_wait TIMEOUT CMD...
slurm_wait() {
  local timeout=$1 start=$SECONDS
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS - start >= timeout)) && return 1
    sleep 0.2
  done
}

_slurm_nodes_idle() {  # all SLURM_TEST_NODE_COUNT nodes idle
  [[ "$(sinfo -h -N -o %T 2>/dev/null | grep -c '^idle$')" == "$SLURM_TEST_NODE_COUNT" ]]
}

# slurm_cluster_start: returns 0 when every node is idle, 77 when Slurm is not usable
# here (not installed, not root), 1 when the daemons fail to start (logs printed).
slurm_cluster_start() {
  local tool
  for tool in slurmctld slurmd munged mungekey sbatch srun scontrol squeue sinfo scancel python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "SKIP: $tool not found (install slurm-wlm and munge: scripts/install-deps.sh)"
      return 77
    fi
  done
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: the test cluster runs slurmd as root; run the test as root"
    return 77
  fi

  local d
  d=$(mktemp -d "${TMPDIR:-/tmp}/ht-slurm.XXXXXX") || return 1
  [[ -d "$d" ]] || return 1
  chmod 755 "$d"  # munged wants every directory above its socket searchable by all
  SLURM_TEST_DIR=$d
  local host nodes=${SLURM_TEST_NODES:-1} cpus=${SLURM_TEST_CPUS:-$(nproc)} i name
  host=$(hostname -s)
  ((cpus < 2)) && cpus=2
  SLURM_TEST_CPUS=$cpus
  SLURM_TEST_NODE_COUNT=$nodes
  SLURM_TEST_NODE_NAMES=()
  if ((nodes == 1)); then
    SLURM_TEST_NODE_NAMES=("$host")
  else
    for ((i = 1; i <= nodes; i++)); do SLURM_TEST_NODE_NAMES+=("node$i"); done
  fi
  mkdir -p "$d/munge" "$d/state" "$d/log" "$d/dev" "$d/jobs"
  chmod 755 "$d/munge"
  trap 'slurm_cluster_stop' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  # 1. munged with a key of its own, so the host's munge (if any) is left alone.
  mungekey --create --keyfile="$d/munge/munge.key" >/dev/null 2>&1 ||
    { slurm_log "mungekey failed"; return 1; }
  munged --foreground --socket="$d/munge/munge.sock" --key-file="$d/munge/munge.key" \
    --pid-file="$d/munge/munged.pid" --seed-file="$d/munge/munged.seed" \
    --log-file="$d/log/munged.log" >"$d/log/munged.out" 2>&1 &
  SLURM_TEST_MUNGED_PID=$!
  if ! slurm_wait 10 test -S "$d/munge/munge.sock"; then
    slurm_log "munged did not start"
    return 1
  fi

  # 2. Fake GPUs for the GRES the job scripts ask for (the nodes share the files).
  for ((i = 0; i < cpus; i++)); do
    mknod "$d/dev/gpu$i" c 1 3 2>/dev/null || : >"$d/dev/gpu$i"
  done

  # 3. slurm.conf and gres.conf (slurmd reads gres.conf next to slurm.conf).
  local ports=() node_lines="" all_nodes
  read -r -a ports <<<"$(_slurm_free_ports $((nodes + 1)))"
  [[ ${#ports[@]} == $((nodes + 1)) ]] || { slurm_log "no free ports"; return 1; }
  for ((i = 0; i < nodes; i++)); do
    name=${SLURM_TEST_NODE_NAMES[$i]}
    mkdir -p "$d/spool/$name"
    node_lines+="NodeName=${name} NodeHostname=${host} NodeAddr=127.0.0.1 Port=${ports[$((i + 1))]}"
    node_lines+=" CPUs=${cpus} RealMemory=1000 Gres=gpu:${cpus} State=UNKNOWN"$'\n'
  done
  all_nodes=$(IFS=,; echo "${SLURM_TEST_NODE_NAMES[*]}")
  cat >"$d/slurm.conf" <<CONF
ClusterName=hpctrain-test
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${d}/munge/munge.sock,cred_expire=10
StateSaveLocation=${d}/state
SlurmdSpoolDir=${d}/spool/%n
SlurmctldPidFile=${d}/slurmctld.pid
SlurmdPidFile=${d}/slurmd-%n.pid
SlurmctldLogFile=${d}/log/slurmctld.log
SlurmdLogFile=${d}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=600
InactiveLimit=0
SlurmdParameters=config_overrides
GresTypes=gpu
${node_lines}PartitionName=debug Nodes=${all_nodes} Default=YES MaxTime=INFINITE State=UP
CONF
  echo "NodeName=${all_nodes} Name=gpu File=${d}/dev/gpu[0-$((cpus - 1))]" >"$d/gres.conf"
  export SLURM_CONF=$d/slurm.conf

  # 4. The daemons, in the foreground (-D) so that their pids are ours to stop.
  slurmctld -D -i -f "$SLURM_CONF" >"$d/log/slurmctld.out" 2>&1 &
  SLURM_TEST_CTLD_PID=$!
  SLURM_TEST_SLURMD_PIDS=()
  for name in "${SLURM_TEST_NODE_NAMES[@]}"; do
    slurmd -D -N "$name" -f "$SLURM_CONF" >"$d/log/slurmd-$name.out" 2>&1 &
    SLURM_TEST_SLURMD_PIDS+=($!)
  done
  if ! slurm_wait 60 _slurm_nodes_idle; then
    slurm_log "nodes ${all_nodes} not all idle within 60 s"
    sinfo -N -l >&2 2>&1
    scontrol show node >&2 2>&1
    return 1
  fi
  slurm_log "up: ${nodes} node(s) ${all_nodes}, ${cpus} CPUs each, controller port ${ports[0]}, dir ${d}"
  return 0
}

_slurm_kill() {  # _slurm_kill PID NAME: TERM, then KILL after 5 s
  local pid=$1 i
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 25; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
    sleep 0.2
  done
  slurm_log "$2 (pid $pid) ignored SIGTERM; killing it"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

# Prints the daemon logs (tails) to stderr.
slurm_dump_logs() {
  local name f
  [[ -n "${SLURM_TEST_DIR:-}" ]] || return 0
  for name in slurmctld "${SLURM_TEST_NODE_NAMES[@]/#/slurmd-}" munged; do
    f=$SLURM_TEST_DIR/log/$name.log
    [[ -s "$f" ]] || f=$SLURM_TEST_DIR/log/$name.out  # a daemon that died before logging
    [[ -s "$f" ]] || continue
    echo "----- ${f} (last 40 lines) -----" >&2
    tail -n 40 "$f" >&2
  done
}

# slurm_cluster_stop: cancels every job, stops the daemons (only the pids this script
# started), prints logs if the test is failing, removes the directory unless
# SLURM_TEST_KEEP=1. Safe to call twice.
slurm_cluster_stop() {
  local status=$? pid jobs
  [[ -n "${SLURM_TEST_DIR:-}" ]] || return "$status"
  trap - EXIT INT TERM
  if [[ -n "${SLURM_TEST_CTLD_PID:-}" ]] && kill -0 "$SLURM_TEST_CTLD_PID" 2>/dev/null; then
    jobs=$(squeue -h -o %A 2>/dev/null)
    if [[ -n "$jobs" ]]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null
      slurm_wait 20 _slurm_no_jobs || slurm_log "jobs still listed after scancel: $(squeue -h -o '%A %T' | tr '\n' ' ')"
    fi
  fi
  if [[ "$status" -ne 0 && "$status" -ne 77 ]]; then
    slurm_log "test failed (exit $status): daemon logs follow"
    slurm_dump_logs
  fi
  for pid in "${SLURM_TEST_SLURMD_PIDS[@]:-}"; do _slurm_kill "$pid" slurmd; done
  _slurm_kill "${SLURM_TEST_CTLD_PID:-}" slurmctld
  _slurm_kill_stray_steps
  _slurm_kill "${SLURM_TEST_MUNGED_PID:-}" munged
  if [[ "${SLURM_TEST_KEEP:-0}" == 1 ]]; then
    slurm_log "kept ${SLURM_TEST_DIR}"
  else
    rm -rf "$SLURM_TEST_DIR"
  fi
  SLURM_TEST_DIR=""
  return "$status"
}

# Job steps that outlived scancel: slurmstepd daemonizes (its parent is init), so find
# ours by the files under SLURM_TEST_DIR they hold open, and kill them with their tasks.
_slurm_kill_stray_steps() {
  local pid kid fd pids=() stray=() next=()
  for pid in $(pgrep -x slurmstepd 2>/dev/null); do
    for fd in "/proc/$pid/fd/"*; do
      if [[ "$(readlink "$fd" 2>/dev/null)" == "$SLURM_TEST_DIR/"* ]]; then
        stray+=("$pid")
        break
      fi
    done
  done
  [[ ${#stray[@]} -gt 0 ]] || return 0
  slurm_log "killing job steps left behind: ${stray[*]}"
  while [[ ${#stray[@]} -gt 0 ]]; do  # breadth-first over the process tree
    pids+=("${stray[@]}")
    next=()
    for pid in "${stray[@]}"; do
      for kid in $(pgrep -P "$pid" 2>/dev/null); do next+=("$kid"); done
    done
    stray=("${next[@]}")
  done
  kill -KILL "${pids[@]}" 2>/dev/null
}

_slurm_no_jobs() { [[ -z "$(squeue -h -o %A 2>/dev/null)" ]]; }

# slurm_job_field JOBID FIELD: one field of `scontrol show job` (JobState, Restarts,
# ExitCode, ...).
slurm_job_field() {
  scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# slurm_wait_job_state JOBID REGEX TIMEOUT: waits until JobState matches REGEX
# (anchored); prints the state. Returns 1 on timeout.
slurm_wait_job_state() {
  local job=$1 re=$2 timeout=$3 start=$SECONDS state
  while :; do
    state=$(slurm_job_field "$job" JobState)
    if [[ "$state" =~ ^($re)$ ]]; then
      echo "$state"
      return 0
    fi
    if ((SECONDS - start >= timeout)); then
      echo "${state:-unknown}"
      return 1
    fi
    sleep 0.2
  done
}
