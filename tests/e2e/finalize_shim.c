// A test shim, loaded with LD_PRELOAD: MPI_Finalize never returns on the rank that
// HT_HANG_FINALIZE_RANK names (PMI_RANK, as MPICH's launcher sets it), and the rank that
// HT_HANG_AT_EXIT_RANK names never returns from an exit handler it registers there, so that
// the e2e tests reach a rank whose ending hangs after its work is done (case
// ending_is_bounded); the rank that HT_LATE_FINALIZE_RANK names enters MPI_Finalize a second
// after the others (case finalize_over_tcp), and a barrier on MPI_COMM_WORLD never returns
// on the rank that HT_HANG_BARRIER_RANK names (hpctrain's only one: the ranks' wait for each
// other at their end; case ending_is_bounded).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int names_this_rank(const char* variable) {
  const char* named = getenv(variable);
  const char* rank = getenv("PMI_RANK");
  return named && rank && strcmp(named, rank) == 0;
}

static void hang(void) {
  for (;;) pause();
}

int MPI_Finalize(void) {
  if (names_this_rank("HT_HANG_FINALIZE_RANK")) hang();
  if (names_this_rank("HT_HANG_AT_EXIT_RANK")) atexit(hang);
  if (names_this_rank("HT_LATE_FINALIZE_RANK")) sleep(1);
  int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "MPI_Finalize");
  return next();
}

int MPI_Barrier(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD && names_this_rank("HT_HANG_BARRIER_RANK")) hang();
  int (*next)(MPI_Comm) = (int (*)(MPI_Comm))dlsym(RTLD_NEXT, "MPI_Barrier");
  return next(comm);
}
