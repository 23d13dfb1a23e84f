/* A ring of MPI_Send/MPI_Recv with standard MPICH: proves `weft run` serves PMI-1 as
 * MPICH's own launcher does. Prints "mpich_ring: rank R of N ok" per rank. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, token;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    if (size == 1) {
        /* A blocking send to oneself may wait for its receive: nothing to pass around. */
    } else if (rank == 0) {
        token = 1000;
        MPI_Send(&token, 1, MPI_INT, right, 7, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (token != 1000 + size - 1) {
            fprintf(stderr, "mpich_ring: rank 0 got token %d, expected %d\n", token, 1000 + size - 1);
            MPI_Abort(MPI_COMM_WORLD, 5);
        }
    } else {
        MPI_Recv(&token, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token += 1;
        MPI_Send(&token, 1, MPI_INT, right, 7, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("mpich_ring: rank %d of %d ok\n", rank, size);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
