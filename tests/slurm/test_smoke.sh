#!/usr/bin/env bash
# The test cluster itself works: a batch job completes, `srun --mpi=pmi2 -n 2` starts a
# 2-rank MPICH program whose ranks find each other (Debian's MPICH speaks PMI-1/PMI-2,
# which Slurm's pmi2 plugin serves), and hydra's mpiexec works inside an allocation.
#   bash tests/slurm/test_smoke.sh        exit 0 pass, 1 fail, 77 skip
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$here/slurm_cluster.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
terminal='COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED'

slurm_cluster_start || exit $?
work=$SLURM_TEST_DIR/jobs

echo "== a trivial batch job"
# shellcheck disable=SC2016  # expanded by the job, not here
jid=$(sbatch --parsable -o "$work/trivial.out" --wrap 'echo "trivial job $SLURM_JOB_ID on $(hostname -s)"') ||
  fail "sbatch refused a trivial job"
state=$(slurm_wait_job_state "$jid" "$terminal" 60) || fail "job $jid still $state after 60 s"
[[ "$state" == COMPLETED ]] || fail "job $jid ended $state: $(cat "$work/trivial.out" 2>&1)"
grep -q "trivial job $jid on" "$work/trivial.out" || fail "job $jid wrote: $(cat "$work/trivial.out")"

echo "== srun MPI plugins"
plugins=$(srun --mpi=list 2>&1)
echo "$plugins"
grep -qw pmi2 <<<"$plugins" || fail "Slurm has no pmi2 plugin"

echo "== srun --mpi=pmi2 -n 2 MPICH hello"
mpicc -o "$work/mpi_hello" "$here/mpi_hello.c" || fail "mpicc failed"
out=$(timeout 60 srun --mpi=pmi2 -n 2 "$work/mpi_hello" 2>&1) || fail "srun exited $?: $out"
echo "$out"
[[ $(grep -c "of 2 sum 3" <<<"$out") == 2 ]] || fail "ranks did not form one world of 2"

echo "== mpiexec -n 2 inside an allocation (hydra starts its proxies with srun)"
out=$(timeout 60 salloc -n 2 mpiexec -n 2 "$work/mpi_hello" 2>&1) || fail "salloc mpiexec exited $?: $out"
[[ $(grep -c "of 2 sum 3" <<<"$out") == 2 ]] || fail "mpiexec ranks did not form one world: $out"

echo "== --gpus-per-task=1 (fake GPUs): what each task sees"
# shellcheck disable=SC2016
timeout 60 srun -n 2 --gpus-per-task=1 bash -c 'echo "task $SLURM_PROCID CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"' ||
  fail "srun --gpus-per-task=1 failed"
echo "PASS"
