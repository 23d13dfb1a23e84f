/* Dynamic processes through the C ABI, checked by the program itself: the two halves of the
 * world meet at a port (MPI_Open_port, MPI_Comm_accept, MPI_Comm_connect); the world spawns
 * children running this program (MPI_Comm_spawn, then MPI_Comm_spawn_multiple with two
 * commands), which find their parents with MPI_Comm_get_parent; both sides talk over the
 * intercommunicator, merge it and reduce; a spawn of a program that does not exist fails at
 * every member with MPI_ERR_SPAWN. Parents print "dynamic: rank R of N ok", children
 * "dynamic child: rank R of N (appnum A) ok" when every check held, "FAIL" lines otherwise.
 * Weft's own test program. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            printf("dynamic: FAIL line %d: ", __LINE__);                                   \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* Both sides of an intercommunicator: every member sends its rank to the other side's rank
 * 0, which checks it got one from each; then the merged communicator sums everyone's
 * `weight`, which must come to `total`. */
static void talk(MPI_Comm inter, int high, int weight, int total) {
    int rank, remote, got, sum = 0, msize;
    MPI_Comm merged;
    MPI_Comm_rank(inter, &rank);
    MPI_Comm_remote_size(inter, &remote);
    MPI_Send(&rank, 1, MPI_INT, 0, 7, inter);
    if (rank == 0) {
        int seen = 0;
        for (int i = 0; i < remote; i++) {
            MPI_Status st;
            MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 7, inter, &st);
            CHECK(got == st.MPI_SOURCE, "got %d from remote rank %d", got, st.MPI_SOURCE);
            seen |= 1 << got;
        }
        CHECK(seen == (1 << remote) - 1, "heard from %x of %d", seen, remote);
    }
    CHECK(MPI_Intercomm_merge(inter, high, &merged) == MPI_SUCCESS, "merge");
    MPI_Comm_size(merged, &msize);
    MPI_Allreduce(&weight, &sum, 1, MPI_INT, MPI_SUM, merged);
    CHECK(sum == total, "merged sum %d, expected %d (merged size %d)", sum, total, msize);
    MPI_Comm_free(&merged);
}

static int child(MPI_Comm parent, int argc, char **argv) {
    int rank, size, remote, appnum = -1, flag;
    int *value;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_remote_size(parent, &remote);
    CHECK(argc >= 3, "children get their arguments (argc %d)", argc);
    int parents = argc >= 3 ? atoi(argv[2]) : -1;
    CHECK(remote == parents, "remote size %d, the parents are %d", remote, parents);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &value, &flag);
    if (flag) appnum = *value;
    MPI_Comm again;
    MPI_Comm_get_parent(&again);
    CHECK(again == parent, "MPI_Comm_get_parent gives the same handle");
    /* Parents weigh 1, children 100: the merged sum tells both apart. */
    talk(parent, 1, 100, parents + 100 * size);
    MPI_Comm_disconnect(&parent);
    MPI_Comm_get_parent(&again);
    CHECK(again == MPI_COMM_NULL, "after disconnect the parent is MPI_COMM_NULL");
    printf("dynamic child: rank %d of %d (appnum %d) %s\n", rank, size, appnum,
           failures ? "FAILED" : "ok");
    MPI_Finalize();
    return failures != 0;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Comm parent;
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) return child(parent, argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    /* Ports: the lower half accepts, the upper half connects. */
    if (size >= 2) {
        int upper = rank >= size / 2, hrank;
        MPI_Comm half, inter;
        char port[MPI_MAX_PORT_NAME] = "";
        MPI_Comm_split(MPI_COMM_WORLD, upper, rank, &half);
        MPI_Comm_rank(half, &hrank);
        if (!upper && hrank == 0) {
            CHECK(MPI_Open_port(MPI_INFO_NULL, port) == MPI_SUCCESS, "open port");
            MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, size / 2, 1, MPI_COMM_WORLD);
        }
        if (upper && hrank == 0)
            MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int rc = upper ? MPI_Comm_connect(port, MPI_INFO_NULL, 0, half, &inter)
                       : MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &inter);
        CHECK(rc == MPI_SUCCESS, "accept/connect rc %d", rc);
        talk(inter, upper, 1, size);
        MPI_Comm_disconnect(&inter);
        if (!upper && hrank == 0) CHECK(MPI_Close_port(port) == MPI_SUCCESS, "close port");
        CHECK(MPI_Close_port("weft-port:127.0.0.1:1") == MPI_ERR_PORT, "closing an unknown port");
        MPI_Comm_free(&half);
    }

    /* The name service: a service is published once, found, withdrawn once; an unknown
     * one is MPI_ERR_NAME, a second publish or withdrawal MPI_ERR_SERVICE. */
    {
        char svc[32], found[MPI_MAX_PORT_NAME] = "";
        int cls = -1;
        snprintf(svc, sizeof svc, "weft-test-%d", rank);
        CHECK(MPI_Publish_name(svc, MPI_INFO_NULL, "weft-port:127.0.0.1:9") == MPI_SUCCESS,
              "publish");
        MPI_Error_class(MPI_Publish_name(svc, MPI_INFO_NULL, "weft-port:127.0.0.1:9"), &cls);
        CHECK(cls == MPI_ERR_SERVICE, "publishing twice: class %d", cls);
        CHECK(MPI_Lookup_name(svc, MPI_INFO_NULL, found) == MPI_SUCCESS &&
                  strcmp(found, "weft-port:127.0.0.1:9") == 0,
              "lookup found %s", found);
        CHECK(MPI_Unpublish_name(svc, MPI_INFO_NULL, found) == MPI_SUCCESS, "unpublish");
        MPI_Error_class(MPI_Lookup_name(svc, MPI_INFO_NULL, found), &cls);
        CHECK(cls == MPI_ERR_NAME, "looking up a withdrawn name: class %d", cls);
        MPI_Error_class(MPI_Unpublish_name(svc, MPI_INFO_NULL, found), &cls);
        CHECK(cls == MPI_ERR_SERVICE, "withdrawing twice: class %d", cls);
    }

    /* MPI_Comm_spawn: two children, told how many parents they have. */
    char nparents[16];
    snprintf(nparents, sizeof nparents, "%d", size);
    char *child_args[] = {"child", nparents, NULL};
    MPI_Comm kids;
    int errcodes[3] = {-1, -1, -1};
    int rc = MPI_Comm_spawn(argv[0], child_args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids,
                            errcodes);
    CHECK(rc == MPI_SUCCESS, "spawn rc %d", rc);
    if (rc == MPI_SUCCESS) {
        int remote;
        MPI_Comm_remote_size(kids, &remote);
        CHECK(remote == 2, "spawned %d, asked for 2", remote);
        CHECK(errcodes[0] == MPI_SUCCESS && errcodes[1] == MPI_SUCCESS && errcodes[2] == -1,
              "errcodes %d %d %d", errcodes[0], errcodes[1], errcodes[2]);
        talk(kids, 0, 1, size + 200);
        MPI_Comm_disconnect(&kids);
    }

    /* MPI_Comm_spawn_multiple: one job of two commands, 1 + 2 processes. */
    char *cmds[] = {argv[0], argv[0]};
    char **argvs[] = {child_args, child_args};
    int maxprocs[] = {1, 2};
    MPI_Info infos[] = {MPI_INFO_NULL, MPI_INFO_NULL};
    rc = MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, 0, MPI_COMM_WORLD, &kids,
                                 MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "spawn_multiple rc %d", rc);
    if (rc == MPI_SUCCESS) {
        talk(kids, 0, 1, size + 300);
        MPI_Comm_disconnect(&kids);
    }

    /* A program that does not exist: MPI_ERR_SPAWN at every member, and the job goes on. */
    rc = MPI_Comm_spawn("/nonexistent/weft-test-program", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0,
                        MPI_COMM_WORLD, &kids, MPI_ERRCODES_IGNORE);
    int class = -1;
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_SPAWN, "spawning a missing program: rc %d class %d", rc, class);
    MPI_Barrier(MPI_COMM_WORLD);

    printf("dynamic: rank %d of %d %s\n", rank, size, failures ? "FAILED" : "ok");
    MPI_Finalize();
    return failures != 0;
}
