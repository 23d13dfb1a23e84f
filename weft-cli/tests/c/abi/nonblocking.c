/* Nonblocking point-to-point, probes and the blocking collectives through the C ABI, checked
 * by the program itself: "nonblocking: rank R of N ok" when every check held, "FAIL" lines
 * otherwise. Weft's own test program. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            printf("nonblocking: FAIL line %d: ", __LINE__);                               \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

#define MAXN 16

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Every rank sends its rank to every other, nonblocking both ways, tagged by sender. */
    int in[MAXN], out = rank * 10, count;
    MPI_Request reqs[2 * MAXN];
    int n = 0;
    for (int r = 0; r < size; r++) {
        if (r == rank) continue;
        MPI_Irecv(&in[r], 1, MPI_INT, r, r, MPI_COMM_WORLD, &reqs[n++]);
    }
    for (int r = 0; r < size; r++) {
        if (r == rank) continue;
        MPI_Isend(&out, 1, MPI_INT, r, rank, MPI_COMM_WORLD, &reqs[n++]);
    }
    MPI_Status st[2 * MAXN];
    MPI_Waitall(n, reqs, st);
    for (int i = 0, r = 0; r < size; r++) {
        if (r == rank) continue;
        CHECK(in[r] == r * 10, "from %d got %d", r, in[r]);
        CHECK(st[i].MPI_SOURCE == r && st[i].MPI_TAG == r, "status %d: %d/%d", i, st[i].MPI_SOURCE, st[i].MPI_TAG);
        MPI_Get_count(&st[i], MPI_INT, &count);
        CHECK(count == 1, "count %d", count);
        i++;
    }
    for (int i = 0; i < n; i++) CHECK(reqs[i] == MPI_REQUEST_NULL, "request %d not freed", i);

    /* Waitany and Testall over a ring exchange; a PROC_NULL request completes at once. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, got = -1, index = -1, flag = 0;
    MPI_Request ring[3];
    MPI_Irecv(&got, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &ring[0]);
    MPI_Issend(&rank, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &ring[1]);
    MPI_Irecv(&count, 1, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &ring[2]);
    for (int done = 0; done < 3; done++) {
        MPI_Status s;
        MPI_Waitany(3, ring, &index, &s);
        CHECK(index >= 0 && index < 3 && ring[index] == MPI_REQUEST_NULL, "waitany index %d", index);
    }
    MPI_Waitany(3, ring, &index, MPI_STATUS_IGNORE);
    CHECK(index == MPI_UNDEFINED, "waitany with none active gave %d", index);
    CHECK(got == prev, "ring got %d", got);
    MPI_Testall(3, ring, &flag, MPI_STATUSES_IGNORE);
    CHECK(flag == 1, "testall of null requests %d", flag);

    /* Probe then receive a message of unknown length; Iprobe finds nothing afterwards. */
    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            MPI_Status s;
            MPI_Probe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &s);
            int len;
            MPI_Get_count(&s, MPI_CHAR, &len);
            char text[64];
            MPI_Recv(text, len, MPI_CHAR, s.MPI_SOURCE, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            char want[64];
            snprintf(want, sizeof want, "hello from %d", s.MPI_SOURCE);
            CHECK(strcmp(text, want) == 0, "probed '%s'", text);
        }
        MPI_Iprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(flag == 0, "iprobe found a message");
    } else {
        char text[64];
        snprintf(text, sizeof text, "hello from %d", rank);
        MPI_Send(text, (int)strlen(text) + 1, MPI_CHAR, 0, 9, MPI_COMM_WORLD);
    }

    /* Sendrecv around the ring; a freed send request completes on its own. */
    int left = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, next, 3, &left, 1, MPI_INT, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(left == prev, "sendrecv got %d", left);
    MPI_Request freed;
    MPI_Isend(&out, 1, MPI_INT, next, 4, MPI_COMM_WORLD, &freed);
    MPI_Request_free(&freed);
    CHECK(freed == MPI_REQUEST_NULL, "freed request not null");
    MPI_Recv(&got, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got == prev * 10, "after free got %d", got);

    /* Requests on contiguous predefined data (the fast path's): a wildcard receive of each
     * rank's message (the barrier keeps later messages out of its reach), a zero-length
     * exchange, and a receive cancelled before anything matched it. */
    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            int v = -1;
            MPI_Status s;
            MPI_Request q;
            MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &q);
            MPI_Wait(&q, &s);
            CHECK(v == s.MPI_SOURCE * 10 + 1 && s.MPI_TAG == 20 + s.MPI_SOURCE,
                  "wildcard irecv got %d from %d, tag %d", v, s.MPI_SOURCE, s.MPI_TAG);
        }
    } else {
        int v = rank * 10 + 1;
        MPI_Request q;
        MPI_Isend(&v, 1, MPI_INT, 0, 20 + rank, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Request zero[2];
    MPI_Status zs[2];
    MPI_Irecv(NULL, 0, MPI_BYTE, prev, 21, MPI_COMM_WORLD, &zero[0]);
    MPI_Isend(NULL, 0, MPI_BYTE, next, 21, MPI_COMM_WORLD, &zero[1]);
    MPI_Waitall(2, zero, zs);
    MPI_Get_count(&zs[0], MPI_BYTE, &count);
    CHECK(count == 0 && zs[0].MPI_SOURCE == prev && zs[0].MPI_TAG == 21,
          "zero-length: count %d from %d, tag %d", count, zs[0].MPI_SOURCE, zs[0].MPI_TAG);
    MPI_Request never;
    MPI_Status cs;
    int cancelled = 0, unused;
    MPI_Irecv(&unused, 1, MPI_INT, next, 22, MPI_COMM_WORLD, &never);
    MPI_Cancel(&never);
    MPI_Wait(&never, &cs);
    MPI_Test_cancelled(&cs, &cancelled);
    CHECK(cancelled == 1 && never == MPI_REQUEST_NULL, "cancelled irecv: %d", cancelled);

    /* Collectives. */
    int all[MAXN], mine[MAXN], expect;
    for (int i = 0; i < size; i++) mine[i] = rank * 100 + i;
    MPI_Alltoall(mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++) CHECK(all[i] == i * 100 + rank, "alltoall[%d] = %d", i, all[i]);
    MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++) CHECK(all[i] == i, "allgather[%d] = %d", i, all[i]);
    memset(all, 0, sizeof all);
    MPI_Gather(&rank, 1, MPI_INT, all, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
    if (rank == size - 1) for (int i = 0; i < size; i++) CHECK(all[i] == i, "gather[%d] = %d", i, all[i]);
    for (int i = 0; i < size; i++) mine[i] = i * 7;
    int piece = -1;
    MPI_Scatter(mine, 1, MPI_INT, &piece, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(piece == rank * 7, "scatter gave %d", piece);
    int sum = -1;
    MPI_Reduce(&rank, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) CHECK(sum == size * (size - 1) / 2, "reduce %d", sum);
    int scanned = -1;
    MPI_Scan(&rank, &scanned, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    expect = rank * (rank + 1) / 2;
    CHECK(scanned == expect, "scan %d, wanted %d", scanned, expect);
    int ex = -1;
    MPI_Exscan(&rank, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank > 0) CHECK(ex == rank * (rank - 1) / 2, "exscan %d", ex);
    for (int i = 0; i < size; i++) mine[i] = rank + i;
    int block = -1;
    MPI_Reduce_scatter_block(mine, &block, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    expect = size * (size - 1) / 2 + size * rank;
    CHECK(block == expect, "reduce_scatter_block %d, wanted %d", block, expect);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, (all[rank] = rank * 3, all), 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++) CHECK(all[i] == i * 3, "in-place allgather[%d] = %d", i, all[i]);

    MPI_Finalize();
    if (failures == 0) printf("nonblocking: rank %d of %d ok\n", rank, size);
    return failures != 0;
}
