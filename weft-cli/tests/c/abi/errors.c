/* Bad arguments get the standard's error classes and messages naming the call and the
 * values (with MPI_ERRORS_RETURN); with the default handler (MPI_ERRORS_ARE_FATAL) the first
 * bad call ends the whole job. Run as `errors return` or `errors fatal`. Weft's own test. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int got, int class, const char *needle, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, got_class = -1;
    MPI_Error_class(got, &got_class);
    MPI_Error_string(got, text, &len);
    if (got_class != class || strstr(text, needle) == NULL) {
        printf("errors: FAIL %s: class %d (wanted %d), message '%s' (wanted '%s')\n", what,
               got_class, class, text, needle);
        failures++;
    }
}

int main(int argc, char **argv) {
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
        if (rank == 1) MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD); /* the others wait here until the job ends */
        MPI_Finalize();
        return 0;
    }
    MPI_Errhandler h = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h);
    if (h != MPI_ERRORS_ARE_FATAL) { printf("errors: FAIL default handler\n"); failures++; }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    expect(MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD), MPI_ERR_RANK, "MPI_Send", "bad rank");
    expect(MPI_Send(&x, 1, MPI_INT, 0, -7, MPI_COMM_WORLD), MPI_ERR_TAG, "-7", "bad tag");
    expect(MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "-1", "bad count");
    expect(MPI_Send(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "MPI_DATATYPE_NULL", "null type");
    expect(MPI_Recv(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_RANK, "MPI_Recv", "bad source");
    /* A message longer than the receive buffer, into a predefined type (MPI_Recv's fast
     * path) and into a derived one (the general path): MPI_ERR_TRUNCATE both times. */
    int pair[2] = {1, 2};
    MPI_Datatype one_int;
    MPI_Type_contiguous(1, MPI_INT, &one_int);
    MPI_Type_commit(&one_int);
    MPI_Request req;
    for (int derived = 0; derived < 2; derived++) {
        MPI_Isend(pair, 2, MPI_INT, rank, 5, MPI_COMM_WORLD, &req);
        expect(MPI_Recv(&x, 1, derived ? one_int : MPI_INT, rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
               MPI_ERR_TRUNCATE, "longer than the 4-byte receive buffer", "truncated receive");
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Type_free(&one_int);
    expect(MPI_Bcast(&x, 1, MPI_INT, -2, MPI_COMM_WORLD), MPI_ERR_ROOT, "-2", "bad root");
    expect(MPI_Allreduce(&x, &x, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP, "MPI_Allreduce", "null op");
    expect(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM, "MPI_COMM_NULL", "null comm");
    expect(MPI_File_delete("x", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_OPERATION, "MPI_File_delete",
           "unsupported");
    MPI_Comm kids;
    expect(MPI_Comm_spawn("x", MPI_ARGV_NULL, 0, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids, MPI_ERRCODES_IGNORE),
           MPI_ERR_ARG, "maxprocs is 0", "spawn of no process");
    expect(MPI_Comm_connect("tcp://x", MPI_INFO_NULL, 0, MPI_COMM_SELF, &kids), MPI_ERR_PORT,
           "is not a port name", "bad port name");
    int ok = 0;
    MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    ok = failures == 0;
    MPI_Finalize();
    if (ok) printf("errors: rank %d ok\n", rank);
    return !ok;
}
