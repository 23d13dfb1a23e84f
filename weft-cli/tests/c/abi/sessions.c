/* The sessions model through the C ABI, with no MPI_Init: process sets, groups from them,
 * communicators from groups (intra and inter), session error handlers; then the world model
 * joining a live session. Prints "sessions: rank R of N ok" when every check held, "FAIL"
 * lines otherwise. Weft's own test program. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            printf("sessions: FAIL line %d: ", __LINE__);                                  \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static int handled = 0;
static MPI_Session the_session;
static void on_error(MPI_Session *s, int *code, ...) {
    CHECK(*s == the_session, "the handler got another session");
    handled = *code;
}

int main(void) {
    MPI_Session session;
    MPI_Errhandler eh;
    MPI_Session_create_errhandler(on_error, &eh);
    int rc = MPI_Session_init(MPI_INFO_NULL, eh, &session);
    CHECK(rc == MPI_SUCCESS, "Session_init %d", rc);
    the_session = session;
    int flag = 1;
    MPI_Initialized(&flag);
    CHECK(!flag, "MPI_Initialized says yes in the sessions model");

    int npsets = 0, len = 0;
    MPI_Session_get_num_psets(session, MPI_INFO_NULL, &npsets);
    CHECK(npsets >= 2, "%d process sets", npsets);
    char name[64];
    int found_world = 0;
    for (int i = 0; i < npsets; i++) {
        len = 0;
        MPI_Session_get_nth_pset(session, MPI_INFO_NULL, i, &len, NULL);
        CHECK(len > 1 && len <= (int)sizeof name, "pset %d length %d", i, len);
        MPI_Session_get_nth_pset(session, MPI_INFO_NULL, i, &len, name);
        found_world |= strcmp(name, "mpi://WORLD") == 0;
    }
    CHECK(found_world, "no mpi://WORLD");
    MPI_Info info;
    MPI_Session_get_pset_info(session, "mpi://WORLD", &info);
    char value[16];
    MPI_Info_get_string(info, "mpi_size", &len, value, &flag);
    MPI_Info_free(&info);

    MPI_Group world;
    MPI_Group_from_session_pset(session, "mpi://WORLD", &world);
    int rank, size;
    MPI_Group_rank(world, &rank);
    MPI_Group_size(world, &size);
    char want[16];
    snprintf(want, sizeof want, "%d", size);
    CHECK(flag && strcmp(value, want) == 0, "mpi_size '%s', group of %d", value, size);

    MPI_Comm comm;
    MPI_Comm_create_from_group(world, "org.weft.test", MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm);
    CHECK(sum == size * (size - 1) / 2, "sum %d", sum);
    int r;
    MPI_Comm_rank(comm, &r);
    CHECK(r == rank, "rank %d in the new communicator, %d in the group", r, rank);

    {
        /* MPI 5's buffer of a session: buffered sends on a communicator made from its groups
         * use it (the process has none), one 1 MiB message's worth: a second is
         * MPI_ERR_BUFFER until the first has gone; a communicator's own buffer comes first;
         * the detach waits for the sends and hands the buffer back. */
        int next = (rank + 1) % size, prev = (rank + size - 1) % size, cls = -1, isize = -1;
        int big = 1 << 20, bsize = big + MPI_BSEND_OVERHEAD;
        char *sbuf = malloc(bsize), *out = calloc(big, 1), *in = malloc(big);
        void *back = NULL;
        CHECK(MPI_Session_attach_buffer(session, sbuf, bsize) == MPI_SUCCESS, "session attach");
        rc = MPI_Session_attach_buffer(session, sbuf, bsize);
        CHECK(rc != MPI_SUCCESS && handled == rc, "attaching twice: rc %d", rc);
        CHECK(MPI_Bsend(out, big, MPI_BYTE, next, 30, comm) == MPI_SUCCESS, "session bsend");
        rc = MPI_Bsend(out, big, MPI_BYTE, next, 30, comm);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_BUFFER, "a second session bsend with no room: class %d", cls);
        MPI_Comm own;
        MPI_Comm_create_from_group(world, "org.weft.own", MPI_INFO_NULL, MPI_ERRORS_RETURN, &own);
        MPI_Comm_attach_buffer(own, MPI_BUFFER_AUTOMATIC, 0);
        CHECK(MPI_Bsend(out, big, MPI_BYTE, next, 31, own) == MPI_SUCCESS, "own buffer's bsend");
        MPI_Recv(in, big, MPI_BYTE, prev, 30, comm, MPI_STATUS_IGNORE);
        MPI_Recv(in, big, MPI_BYTE, prev, 31, own, MPI_STATUS_IGNORE);
        MPI_Request flushing;
        MPI_Session_iflush_buffer(session, &flushing);
        MPI_Wait(&flushing, MPI_STATUS_IGNORE);
        MPI_Session_flush_buffer(session);
        CHECK(MPI_Session_detach_buffer(session, &back, &isize) == MPI_SUCCESS && back == sbuf &&
                  isize == bsize,
              "session detach gave %p %d", back, isize);
        rc = MPI_Bsend(out, big, MPI_BYTE, next, 32, comm);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_BUFFER, "detached: no buffer for the session's comm: class %d", cls);
        MPI_Session_attach_buffer(session, MPI_BUFFER_AUTOMATIC, 0);
        MPI_Count csize = -1;
        MPI_Session_detach_buffer_c(session, &back, &csize);
        CHECK(back == MPI_BUFFER_AUTOMATIC, "automatic detach gave %p", back);
        rc = MPI_Session_detach_buffer(session, &back, &isize);
        CHECK(rc != MPI_SUCCESS && handled == rc, "a detach with no buffer: rc %d", rc);
        MPI_Comm_free(&own);
        free(sbuf);
        free(out);
        free(in);
    }

    if (size >= 2) {
        /* Evens and odds joined by an intercommunicator made from the two groups. */
        int evens[64], odds[64], ne = 0, no = 0;
        for (int i = 0; i < size && i < 128; i++) {
            if (i % 2 == 0) evens[ne++] = i;
            else odds[no++] = i;
        }
        MPI_Group ge, go;
        MPI_Group_incl(world, ne, evens, &ge);
        MPI_Group_incl(world, no, odds, &go);
        MPI_Comm inter;
        int even = rank % 2 == 0;
        MPI_Intercomm_create_from_groups(even ? ge : go, 0, even ? go : ge, 0, "org.weft.pairs",
                                         MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter);
        int remote = 0, mine = rank, got = -1;
        MPI_Comm_remote_size(inter, &remote);
        CHECK(remote == (even ? no : ne), "remote size %d", remote);
        int lr;
        MPI_Comm_rank(inter, &lr);
        if (lr == 0) {
            /* The two leaders trade their world ranks. */
            MPI_Sendrecv(&mine, 1, MPI_INT, 0, 1, &got, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE);
            CHECK(got == (even ? 1 : 0), "the other leader sent %d", got);
        }
        MPI_Comm_free(&inter);
        MPI_Group_free(&ge);
        MPI_Group_free(&go);
    }

    /* A bad process set goes to the session's handler, which returns. */
    MPI_Group none;
    rc = MPI_Group_from_session_pset(session, "mpi://NOWHERE", &none);
    CHECK(rc != MPI_SUCCESS && handled == rc, "bad pset: rc %d, handler saw %d", rc, handled);
    MPI_Session_call_errhandler(session, MPI_ERR_OTHER);
    CHECK(handled == MPI_ERR_OTHER, "call_errhandler: handler saw %d", handled);
    MPI_Errhandler got_eh;
    MPI_Session_get_errhandler(session, &got_eh);
    CHECK(got_eh == eh, "get_errhandler");
    MPI_Errhandler_free(&got_eh);
    MPI_Errhandler_free(&eh);

    /* The world model joins the running session, and ends before it. */
    MPI_Init(NULL, NULL);
    int wsize;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    CHECK(wsize == size, "world of %d, pset of %d", wsize, size);
    MPI_Barrier(comm);
    MPI_Comm_free(&comm);
    MPI_Group_free(&world);
    MPI_Finalize();
    MPI_Finalized(&flag);
    CHECK(flag, "MPI_Finalized says no");
    MPI_Session_finalize(&session);
    CHECK(session == MPI_SESSION_NULL, "finalized session not null");
    if (failures == 0) printf("sessions: rank %d of %d ok\n", rank, size);
    return failures != 0;
}
