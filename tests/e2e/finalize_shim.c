// A test shim, loaded with LD_PRELOAD: MPI_Finalize never returns on the rank that
// HT_HANG_FINALIZE_RANK names (PMI_RANK, as MPICH's launcher sets it), so that the e2e
// tests reach a rank whose ending hangs after its work is done (case ending_is_bounded).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int MPI_Finalize(void) {
  const char* hang = getenv("HT_HANG_FINALIZE_RANK");
  const char* rank = getenv("PMI_RANK");
  if (hang && rank && strcmp(hang, rank) == 0) {
    for (;;) pause();
  }
  int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "MPI_Finalize");
  return next();
}
