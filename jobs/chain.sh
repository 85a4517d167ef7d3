#!/usr/bin/env bash
# Submits a chain of K jobs that continue one training run: each job starts when the
# previous one has ended and resumes from its newest checkpoint (--resume auto). Use it
# where jobs may not requeue themselves, or to queue the whole run up front.
#
#   jobs/chain.sh [-n K] [--dependency afternotok|afterany] [--sbatch "OPTIONS"] \
#                 [SBATCH_SCRIPT] -- CONFIG.yaml [hpctrain train options]
#   jobs/chain.sh -n 4 -- configs/fashion_mnist_mlp.yaml --set train.epochs=100
#   jobs/chain.sh -n 3 --sbatch "--time=01:00:00" jobs/train_multi_node.sbatch -- configs/x.yaml
#
#   -n K            jobs in the chain (default 3).
#   --dependency    afternotok (default): a job starts only if every earlier one did
#                   not finish the training (it stopped on the time-limit warning with
#                   exit 75, timed out, or failed); once one job finishes, the rest of
#                   the chain is cancelled (--kill-on-invalid-dep=yes), so no allocation
#                   is spent on a finished run. (On the previous job alone, a cancelled
#                   link would count as "not ok" and start the one after it.)
#                   afterany: the next job starts whatever happened (a job after the
#                   end of the run resumes from the last checkpoint and has nothing to do).
#   --sbatch OPTS   extra sbatch options for every job (word-split), e.g. --time, -o.
#   SBATCH_SCRIPT   default jobs/train_single_node.sbatch.
# A --resume option is given to the first job only. The jobs run with HPCTRAIN_REQUEUE=0: a job that stops on the warning signal exits 75
# instead of requeuing itself, and the next link of the chain goes on. Prints the job
# ids, one a line. Submit from the run directory (the batch scripts run there).
set -euo pipefail

count=3
dependency=afternotok
sbatch_opts=""
script=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n | --dependency | --sbatch)
      [[ $# -ge 2 ]] || { echo "chain.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;&
    -n) count=$2; shift 2 ;;
    --dependency) dependency=$2; shift 2 ;;
    --sbatch) sbatch_opts=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "chain.sh: unknown option $1" >&2; exit 2 ;;
    *) script=$1; shift ;;
  esac
done
script=${script:-"$(dirname "$0")/train_single_node.sbatch"}
if [[ $# -lt 1 ]]; then
  echo "chain.sh: expected -- CONFIG.yaml [hpctrain train options] (see --help)" >&2
  exit 2
fi
[[ "$count" =~ ^[1-9][0-9]*$ ]] || { echo "chain.sh: -n: expected a positive count, got '$count'" >&2; exit 2; }
case "$dependency" in
  afternotok) dep_opts=(--kill-on-invalid-dep=yes) ;;
  afterany) dep_opts=() ;;
  *) echo "chain.sh: --dependency: expected afternotok or afterany, got '$dependency'" >&2; exit 2 ;;
esac
read -r -a extra <<<"$sbatch_opts"
# A --resume given is for the first job: the later ones continue from the newest checkpoint
# (never would refuse it, a PATH would go back to it), or from the PATH given where the
# first job wrote none (auto:PATH).
requeued_resume() {  # as in the batch scripts
  case $1 in
    auto | never) printf '%s' auto ;;
    auto:*) printf '%s' "$1" ;;
    *) printf 'auto:%s' "$1" ;;
  esac
}
later=()
value=0
for a in "$@"; do
  if ((value)); then
    value=0
    later+=("$(requeued_resume "$a")")
  elif [[ $a == --resume=* ]]; then
    later+=("--resume=$(requeued_resume "${a#--resume=}")")
  else
    [[ $a == --resume ]] && value=1
    later+=("$a")
  fi
done

after=""  # afternotok: every earlier job; afterany: the previous one
for ((i = 1; i <= count; i++)); do
  dep=()
  [[ -n "$after" ]] && dep=("--dependency=${dependency}${after}" "${dep_opts[@]}")
  args=("$@")
  ((i > 1)) && args=("${later[@]}")
  id=$(sbatch --parsable --export=ALL,HPCTRAIN_REQUEUE=0 "${extra[@]}" "${dep[@]}" \
    "$script" "${args[@]}")
  id=${id%%;*}  # --parsable prints "id" or "id;cluster"
  if [[ "$dependency" == afternotok ]]; then after+=":$id"; else after=":$id"; fi
  echo "$id"
done
