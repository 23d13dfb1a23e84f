/* The C ABI's basics, checked by the program itself: it prints "basics: rank R of N ok"
 * when every check held, and "basics: FAIL ..." lines otherwise. Weft's own test program. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            printf("basics: FAIL line %d: ", __LINE__);                                    \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv) {
    int flag = -1, provided = -1, rank, size, len, major, minor;
    MPI_Initialized(&flag);
    CHECK(flag == 0, "initialized before init: %d", flag);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_SERIALIZED, "provided %d", provided);
    MPI_Query_thread(&flag);
    CHECK(flag == provided, "query_thread %d", flag);
    MPI_Is_thread_main(&flag);
    CHECK(flag == 1, "is_thread_main %d", flag);
    MPI_Initialized(&flag);
    CHECK(flag == 1, "initialized %d", flag);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int self_rank = -1, self_size = -1;
    MPI_Comm_rank(MPI_COMM_SELF, &self_rank);
    MPI_Comm_size(MPI_COMM_SELF, &self_size);
    CHECK(self_rank == 0 && self_size == 1, "self %d/%d", self_rank, self_size);

    /* A ring: each rank sends its rank to the next, receives from any source. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, got = -1, count = -1;
    MPI_Status st;
    if (rank % 2 == 0) {
        MPI_Send(&rank, 1, MPI_INT, next, 42, MPI_COMM_WORLD);
        MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    } else {
        MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Send(&rank, 1, MPI_INT, next, 42, MPI_COMM_WORLD);
    }
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(got == prev && st.MPI_SOURCE == prev && st.MPI_TAG == 42 && count == 1,
          "ring got %d from %d tag %d count %d", got, st.MPI_SOURCE, st.MPI_TAG, count);
    MPI_Get_count(&st, MPI_SHORT, &count);
    CHECK(count == 2, "count in shorts %d", count);
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK(count == MPI_UNDEFINED, "count in doubles %d", count);

    /* On a communicator that numbers the world backwards, a status names the sender by its
     * rank there, with a wildcard source and a given one. */
    MPI_Comm backwards;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &backwards);
    int back_rank = -1;
    MPI_Comm_rank(backwards, &back_rank);
    if (size >= 2 && back_rank == 0) {
        MPI_Send(&rank, 1, MPI_INT, 1, 3, backwards);
        MPI_Send(&rank, 1, MPI_INT, 1, 4, backwards);
    } else if (size >= 2 && back_rank == 1) {
        MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 3, backwards, &st);
        CHECK(got == size - 1 && st.MPI_SOURCE == 0 && st.MPI_TAG == 3,
              "backwards any source: got %d from %d tag %d", got, st.MPI_SOURCE, st.MPI_TAG);
        MPI_Recv(&got, 1, MPI_INT, 0, MPI_ANY_TAG, backwards, &st);
        CHECK(got == size - 1 && st.MPI_SOURCE == 0 && st.MPI_TAG == 4,
              "backwards source 0: got %d from %d tag %d", got, st.MPI_SOURCE, st.MPI_TAG);
    }
    MPI_Comm_free(&backwards);

    /* MPI_PROC_NULL: a send does nothing, a receive completes at once. */
    MPI_Send(&rank, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    MPI_Recv(&got, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0,
          "proc_null status %d %d %d", st.MPI_SOURCE, st.MPI_TAG, count);

    /* Collectives. */
    double x[3] = {rank, 1.0, -rank}, sum[3];
    MPI_Allreduce(x, sum, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum[0] == size * (size - 1) / 2.0 && sum[1] == size, "allreduce %g %g", sum[0], sum[1]);
    long long m = rank;
    MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK(m == size - 1, "in-place max %lld", m);
    char word[16] = "";
    if (rank == size - 1) strcpy(word, "broadcast");
    MPI_Bcast(word, 16, MPI_CHAR, size - 1, MPI_COMM_WORLD);
    CHECK(strcmp(word, "broadcast") == 0, "bcast got '%s'", word);
    MPI_Barrier(MPI_COMM_WORLD);

    /* The environment. */
    char name[MPI_MAX_PROCESSOR_NAME], version[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_processor_name(name, &len);
    CHECK(len > 0 && (int)strlen(name) == len, "processor name '%s' %d", name, len);
    MPI_Get_library_version(version, &len);
    CHECK(strstr(version, "Weft") != NULL || strstr(version, "weft") != NULL, "version '%s'", version);
    MPI_Get_version(&major, &minor);
    CHECK(major == 5 && minor == 0, "MPI %d.%d", major, minor);
    MPI_Abi_get_version(&major, &minor);
    CHECK(major == MPI_ABI_VERSION && minor == MPI_ABI_SUBVERSION, "ABI %d.%d", major, minor);
    /* No Fortran bindings: no Fortran ABI details until the program sets them, once. */
    MPI_Info fortran;
    MPI_Abi_get_fortran_info(&fortran);
    CHECK(fortran == MPI_INFO_NULL, "Fortran ABI info before it was set");
    MPI_Info_create(&fortran);
    MPI_Info_set(fortran, "mpi_integer_size", "4");
    MPI_Abi_set_fortran_info(fortran);
    MPI_Info_free(&fortran);
    MPI_Abi_get_fortran_info(&fortran);
    char isize[8] = "";
    int ilen = sizeof isize, found = 0;
    MPI_Info_get_string(fortran, "mpi_integer_size", &ilen, isize, &found);
    CHECK(found && strcmp(isize, "4") == 0, "Fortran ABI info after it was set: '%s'", isize);
    MPI_Info_free(&fortran);
    int t = 1, f = 0, is_set = -1;
    MPI_Abi_get_fortran_booleans(4, &t, &f, &is_set);
    CHECK(is_set == 0, "Fortran booleans set before they were");
    int yes = -1, no = 0;
    MPI_Abi_set_fortran_booleans(4, &yes, &no);
    MPI_Abi_get_fortran_booleans(4, &t, &f, &is_set);
    CHECK(is_set == 1 && t == -1 && f == 0, "Fortran booleans %d %d %d", is_set, t, f);
    /* Each is set once; a LOGICAL's size is a power of two up to 16. */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Info_create(&fortran);
    int rc = MPI_Abi_set_fortran_info(fortran);
    CHECK(rc == MPI_ERR_ABI, "setting the Fortran ABI info twice returned %d", rc);
    MPI_Info_free(&fortran);
    rc = MPI_Abi_set_fortran_booleans(4, &yes, &no);
    CHECK(rc == MPI_ERR_ABI, "setting the 4-byte booleans twice returned %d", rc);
    rc = MPI_Abi_get_fortran_booleans(3, &t, &f, &is_set);
    CHECK(rc == MPI_ERR_ARG, "booleans of logical_size 3: %d", rc);
    MPI_Comm parent = MPI_COMM_WORLD;
    MPI_Comm_get_parent(&parent);
    CHECK(parent == MPI_COMM_NULL, "a process nothing spawned has a parent");
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Info hw = MPI_INFO_NULL;
    int nkeys = -1;
    MPI_Get_hw_resource_info(&hw);
    MPI_Info_get_nkeys(hw, &nkeys);
    CHECK(hw != MPI_INFO_NULL && nkeys >= 0, "hw resource info: %d keys", nkeys);
    MPI_Info_free(&hw);
    double t0 = MPI_Wtime(), t1 = MPI_Wtime();
    CHECK(t1 >= t0 && MPI_Wtick() > 0 && MPI_Wtick() < 1, "wtime %g %g tick %g", t0, t1, MPI_Wtick());
    CHECK(MPI_Aint_add(100, -30) == 70 && MPI_Aint_diff(100, 30) == 70, "aint arithmetic");

    /* Handles as integers: predefined ones are their values, and come back. */
    CHECK(MPI_Comm_fromint(MPI_Comm_toint(MPI_COMM_WORLD)) == MPI_COMM_WORLD, "comm toint");
    CHECK(MPI_Type_toint(MPI_INT) == (int)(intptr_t)MPI_INT, "type toint");
    CHECK(MPI_Op_fromint(MPI_Op_toint(MPI_SUM)) == MPI_SUM, "op toint");
#ifdef WEFT_MPI /* MPICH's mpi_abi.h leaves out the Fortran conversions */
    CHECK(MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_SELF)) == MPI_COMM_SELF, "comm c2f");
#endif

    MPI_Finalize();
    MPI_Finalized(&flag);
    CHECK(flag == 1, "finalized %d", flag);
    if (failures == 0) printf("basics: rank %d of %d ok\n", rank, size);
    return failures != 0;
}
