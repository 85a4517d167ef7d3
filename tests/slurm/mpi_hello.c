/* Smallest MPI program that proves the ranks found each other: every rank prints
   its rank, the world size and the sum of (rank + 1) over all ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, one = 0, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  one = rank + 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("hello rank %d of %d sum %d\n", rank, size, sum);
  MPI_Finalize();
  return 0;
}
