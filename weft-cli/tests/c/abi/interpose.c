/* A profiling layer: defines MPI_Send and MPI_Finalize, counts, and calls the PMPI_ names
 * (the library's MPI_ names are weak aliases of its PMPI_ ones). Weft's own test. */
#include <mpi.h>
#include <stdio.h>

static int sends = 0;

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    sends++;
    return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Finalize(void) {
    int rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("interpose: rank %d made %d sends\n", rank, sends);
    return PMPI_Finalize();
}
